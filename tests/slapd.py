"""A real OpenLDAP server (Debian's slapd) for the sign-in tests: its own config, database and
port in a temporary directory, loaded with ``slapadd``, stopped at teardown."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ldap

from tests.servers import _free_port

SUFFIX = "dc=example,dc=org"
ROOT_DN, ROOT_PW = f"cn=admin,{SUFFIX}", "admin-secret"
CONFIG = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {dir}/slapd.pid
database mdb
maxsize 10485760
suffix "{suffix}"
rootdn "{root}"
rootpw {pw}
directory {dir}/db
"""


@dataclass
class Slapd:
    url: str
    directory: Path
    process: subprocess.Popen | None = None

    def modify(self, dn: str, changes: list[tuple[int, str, list[bytes]]]) -> None:
        """An ldapmodify as the directory's admin (a group's members changed, say)."""
        conn = ldap.initialize(self.url)
        conn.simple_bind_s(ROOT_DN, ROOT_PW)
        conn.modify_s(dn, changes)
        conn.unbind_s()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@contextmanager
def slapd(directory: Path, ldif: str) -> Iterator[Slapd]:
    """slapd serving ``ldif`` (entries under dc=example,dc=org) on a free port."""
    tool = shutil.which("slapd", path="/usr/sbin:/usr/bin")
    assert tool, "slapd is not installed (apt-get install slapd ldap-utils)"
    (directory / "db").mkdir(parents=True)
    conf = directory / "slapd.conf"
    conf.write_text(CONFIG.format(dir=directory, suffix=SUFFIX, root=ROOT_DN, pw=ROOT_PW))
    (directory / "data.ldif").write_text(ldif)
    subprocess.run(
        ["/usr/sbin/slapadd", "-f", str(conf), "-l", str(directory / "data.ldif")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    url = f"ldap://127.0.0.1:{_free_port()}"
    log = (directory / "slapd.log").open("w")
    proc = subprocess.Popen([tool, "-f", str(conf), "-h", url + "/", "-d", "0"], stdout=log, stderr=subprocess.STDOUT)
    server = Slapd(url, directory, proc)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                conn = ldap.initialize(url)
                conn.simple_bind_s(ROOT_DN, ROOT_PW)
                conn.unbind_s()
                break
            except ldap.SERVER_DOWN:
                assert proc.poll() is None, (directory / "slapd.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "slapd did not answer"
                time.sleep(0.1)
        yield server
    finally:
        server.stop()
        log.close()
