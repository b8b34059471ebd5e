"""qos-policy.conf, opensm.conf, GUID files and the atomic artefact store."""

from __future__ import annotations

import pytest

from console.fabric.opensm.conf import (
    OpenSmConfig,
    classify_changes,
    lint_opensm_conf,
    parse_opensm_conf,
    render_opensm_conf,
)
from console.fabric.opensm.files import Artefact, ArtefactStore
from console.fabric.opensm.lint import (
    ArtefactRejected,
    lint_guid_file,
    parse_guid_file,
    render_guid_file,
)
from console.fabric.opensm.partitions import Partition, render_partitions
from console.fabric.opensm.qos import (
    QosClass,
    QosOptions,
    QosPolicy,
    lint_qos_policy,
    parse_qos_policy,
    render_qos_policy,
)

GOOD = render_partitions([Partition("resv1", 0x0003)])


def test_qos_policy_round_trip():
    policy = QosPolicy(0, [QosClass(0x0005, 3, "storage"), QosClass(0x0003, 1)])
    text = render_qos_policy(policy)
    assert "any, pkey 0x0003 : 1" in text
    assert text.index("0x0003") < text.index("0x0005")
    assert lint_qos_policy(text) == []
    assert parse_qos_policy(text) == QosPolicy(0, (QosClass(3, 1), QosClass(5, 3, "storage")))


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("qos-ulps\n default : 16\nend-qos-ulps\n", "bad-sl"),
        ("qos-ulps\n any, pkey 0x3 : 1\n any, pkey 0x8003 : 2\nend-qos-ulps\n", "duplicate-pkey"),
        ("qos-ulps\n sdp, port-num 1 : 2\nend-qos-ulps\n", "syntax"),
        ("qos-ulps\n default : 0\n", "unterminated"),
        ("", "syntax"),
    ],
)
def test_qos_policy_lint(text, code):
    assert code in [p.code for p in lint_qos_policy(text)]


def test_qos_render_refuses_bad_input():
    with pytest.raises(ValueError):
        render_qos_policy(QosPolicy(0, [QosClass(3, 1), QosClass(3, 2)]))
    with pytest.raises(ValueError):
        QosOptions(max_vls=3).validate() and render_qos_policy(QosPolicy(99))


def test_opensm_conf_renders_managed_options_and_lints_clean():
    cfg = OpenSmConfig(
        routing_engine="ftree",
        partition_config_file="/srv/osm/partitions.conf",
        root_guid_file="/srv/osm/root_guids.conf",
        qos=QosOptions(),
    )
    text = render_opensm_conf(cfg)
    opts = parse_opensm_conf(text)
    assert opts["force_log_flush"] == "TRUE"
    assert opts["qos"] == "TRUE"
    assert opts["qos_sl2vl"].count(",") == 15
    assert lint_opensm_conf(text) == []


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("routing_engine fattree\n", "bad-value"),
        ("qos yes\n", "bad-value"),
        ("partition_config_file partitions.conf\n", "bad-value"),
        ("qos TRUE\nqos FALSE\n", "duplicate-option"),
        ("qos TRUE\nqos_max_vls 8\n", "bad-qos"),
        ("just-one-word\n", "syntax"),
    ],
)
def test_opensm_conf_lint(text, code):
    assert code in [p.code for p in lint_opensm_conf(text)]


def test_classify_changes_names_options_that_need_a_restart():
    base = OpenSmConfig(partition_config_file="/a/partitions.conf")
    assert classify_changes(render_opensm_conf(base), render_opensm_conf(base)).action == "none"
    qos = classify_changes(
        render_opensm_conf(base),
        render_opensm_conf(OpenSmConfig(**{**base.__dict__, "qos": QosOptions()})),
    )
    assert qos.action == "reload" and "qos_sl2vl" in qos.changed
    engine = classify_changes(
        render_opensm_conf(base),
        render_opensm_conf(OpenSmConfig(**{**base.__dict__, "routing_engine": "updn"})),
    )
    assert engine.action == "restart" and engine.restart_required_by == ("routing_engine",)
    path = classify_changes({"partition_config_file": "/a"}, {"partition_config_file": "/b"})
    assert path.restart_required_by == ("partition_config_file",)


def test_guid_files():
    text = render_guid_file([0x20, 0x10, 0x20])
    assert text == "0x0000000000000010\n0x0000000000000020\n"
    assert parse_guid_file(text) == [0x10, 0x20]
    assert lint_guid_file(text) == []
    codes = [p.code for p in lint_guid_file("0x10\n0x10\n12\nzz\n")]
    assert codes == ["duplicate-guid", "bad-guid", "bad-guid"]
    assert [p.code for p in lint_guid_file("# nothing\n")] == ["empty"]


def test_store_swaps_atomically_and_rolls_back_to_last_known_good(tmp_path):
    store = ArtefactStore(tmp_path)
    first = store.swap([Artefact("partitions", "partitions.conf", GOOD)])
    assert first.changed == ("partitions.conf",) and first.previous == {"partitions.conf": None}
    store.mark_good()
    newer = render_partitions([Partition("resv2", 0x0004)])
    assert store.swap([Artefact("partitions", "partitions.conf", newer)]).changed
    assert store.swap([Artefact("partitions", "partitions.conf", newer)]).unchanged == ("partitions.conf",)
    assert store.rollback() == ("partitions.conf",)
    assert store.read("partitions.conf") == GOOD
    assert store.rollback() == ()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_store_refuses_a_set_with_one_bad_artefact_and_writes_nothing(tmp_path):
    store = ArtefactStore(tmp_path)
    store.swap([Artefact("partitions", "partitions.conf", GOOD)])
    bad_set = [
        Artefact("qos-policy", "qos-policy.conf", render_qos_policy(QosPolicy(1))),
        Artefact("partitions", "partitions.conf", "Default=0x7fff : ALL=ful ;\n"),
    ]
    with pytest.raises(ArtefactRejected) as exc:
        store.swap(bad_set)
    assert exc.value.problems[0].code == "bad-membership"
    assert store.read("partitions.conf") == GOOD
    assert store.read("qos-policy.conf") is None


def test_store_refuses_unknown_kinds_and_paths(tmp_path):
    store = ArtefactStore(tmp_path)
    with pytest.raises(ArtefactRejected):
        store.swap([Artefact("mystery", "x.conf", "")])
    with pytest.raises(ArtefactRejected):
        store.swap([Artefact("partitions", "../partitions.conf", GOOD)])


def test_rollback_refuses_a_tampered_last_known_good(tmp_path):
    store = ArtefactStore(tmp_path)
    store.swap([Artefact("partitions", "partitions.conf", GOOD)])
    (store.lkg_directory / "partitions.conf").write_text("garbage\n")
    with pytest.raises(ArtefactRejected):
        store.rollback()
    assert store.read("partitions.conf") == GOOD
