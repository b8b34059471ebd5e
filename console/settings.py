"""Settings, all from the environment.

Two ways to run, one code path:

* embedded (nothing configured): SQLite in WAL mode, the in-memory channel layer and a Celery
  worker + beat running inside the web process on an in-memory broker;
* production: ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` (Celery broker and channels-redis),
  with web, workers and beat as separate processes.
"""

import base64
import hashlib
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

PACKAGE_DIR = Path(__file__).resolve().parent
BASE_DIR = PACKAGE_DIR.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _default_data_dir() -> Path:
    """var/ of a checkout; an installed package's ($XDG_DATA_HOME or ~/.local/share)/ibconsole."""
    if (BASE_DIR / "manage.py").exists():
        return BASE_DIR / "var"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "ibconsole"


DATA_DIR = Path(os.environ.get("CONSOLE_DATA_DIR") or _default_data_dir())
PRODUCTION = os.environ.get("CONSOLE_ENV", "dev") == "production"
DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED = not REDIS_URL

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when CONSOLE_ENV=production")
    SECRET_KEY = "dev-only-not-secret-" + "x" * 40

# BMC passwords are encrypted at rest with this Fernet key; unset: derived from SECRET_KEY (console.power.crypto).
CONSOLE_BMC_KEY = os.environ.get("CONSOLE_BMC_KEY", "")
# Fernet key for the fabrics' management keys (m_key, sm_key, sa_key); unset: derived from SECRET_KEY.
CONSOLE_FABRIC_KEY = os.environ.get("CONSOLE_FABRIC_KEY", "")
# Fernet key for webhook signing secrets; unset: derived from SECRET_KEY.
CONSOLE_WEBHOOK_KEY = os.environ.get("CONSOLE_WEBHOOK_KEY", "")
# Earlier SECRET_KEYs (comma-separated): sessions and the secrets above stay readable under them
# until `manage.py rotate_secrets` has re-encrypted the stored secrets (docs/operations.md).
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", "")

# Off unless DEBUG=1 is set explicitly, in every mode (`make run` included): Django's debug pages
# list every URL pattern and show tracebacks to whoever asks.
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000")

# --- WebSocket origins (console/live/origin.py) ------------------------------------------------
# Sockets are accepted only from these origins, scheme, host and port all equal (e.g.
# "https://console.example.org"); empty: only from the console's own origin, i.e. the scheme and
# Host the socket came in on, that Host being one of ALLOWED_HOSTS.
CONSOLE_ALLOWED_ORIGINS = env_list("CONSOLE_ALLOWED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.postgres",
    "servestatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "django_tables2",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_vite",
    "axes",
    "csp",
    "mozilla_django_oidc",
    "console.tenancy",
    "designer",
    "console.fabric",
    "console.notify",
    "scheduling",
    "console.power",
    "console.telemetry",
    "console.live",
    "console.web",
    # The project itself, for its wiring commands (`manage.py up`, `manage.py demo`): they start the
    # processes and seed the demo, so they sit above every app (see [tool.importlinter]).
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "console.tenancy.middleware.CorrelationIdMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # /api/ requests without credentials count against their address's "anon" rate before any
    # permission check answers them (401s are throttled too; see console/tenancy/throttling.py).
    "console.tenancy.middleware.AnonymousApiThrottleMiddleware",
    # Error answers under /api/ are the JSON error body, whatever produced them (see ERRORS below).
    "console.tenancy.middleware.ApiErrorBodyMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [PACKAGE_DIR / "web" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.web.context.navigation",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------
if DATABASE_URL:
    # Persistent connections for WSGI workers and Celery, checked before reuse so one killed while
    # idle (a restart, a failover) is replaced instead of failing the next request. The ASGI
    # entry point sets 0: there every request runs in a thread of its own, and kept connections
    # piled up until garbage collection (9-12 open after 40 sequential requests).
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=int(os.environ.get("CONSOLE_DB_CONN_MAX_AGE", "60")),
            conn_health_checks=True,
        )
    }
    # The hot paths' statements of cached text (scheduling.services.raw.prepared_cursor) are
    # prepared after this many runs on a connection; Django's own cursors are never prepared.
    # "off" for a transaction-pooling PgBouncer older than 1.21 (no prepared statements there).
    _prepare = os.environ.get("CONSOLE_DB_PREPARE_THRESHOLD", "5").strip()
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = int(_prepare) if _prepare.isdigit() else None
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "console.sqlite3"),
            "OPTIONS": {
                # WAL lets readers run beside the single writer; IMMEDIATE makes writers queue
                # on BEGIN instead of failing on lock upgrade, so invariants hold under load.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            "TEST": {"NAME": DATA_DIR / "test-console.sqlite3"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- channels and celery ----------------------------------------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # max_connections: the async pool per process. redis-py's default (100) raised
                # on a burst of simultaneous disconnects (docs RELIABILITY 8); size it explicitly.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "max_connections": int(os.environ.get("CHANNELS_REDIS_POOL", "1000")),
                    }
                ],
                # Explicit, see docs/operations.md: a short expiry keeps ghost members of dead
                # sockets from piling up after reconnect storms; capacity bounds memory per channel.
                "group_expiry": 300,
                "capacity": 1000,
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://localhost//"

CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = 600
CELERY_TASK_SOFT_TIME_LIMIT = 540
# The visibility timeout must exceed the task time limit, or a slow task is redelivered while it
# still runs; keep it short enough that a crashed worker's task comes back within minutes.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 900}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "console")
# Tasks that talk to a fabric go to the queue of its site, ``site.<slug>`` (console/fabric/routing.py).
CELERY_TASK_ROUTES = ("console.fabric.routing.route",)
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- auth -------------------------------------------------------------------------------------
# Every password set (member creation in console.tenancy.actions, the demo seed, Django's own
# commands) passes all four of Django's validators.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "web:login"
LOGIN_REDIRECT_URL = "web:home"
LOGOUT_REDIRECT_URL = "web:login"
API_TOKEN_DEFAULT_DAYS = int(os.environ.get("API_TOKEN_DEFAULT_DAYS", "90"))

# Request body limits (docs/api.md): Django's own for forms and uploads, the same byte limit for
# JSON bodies (console.tenancy.api.parsers), and a nesting limit JSON bodies never need to exceed.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("CONSOLE_MAX_BODY_BYTES", str(2_621_440)))
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE
API_JSON_MAX_DEPTH = int(os.environ.get("CONSOLE_API_JSON_MAX_DEPTH", "32"))
# Times a client gives (reservation start/end, extensions, availability) may lie at most this far ahead.
CONSOLE_TIME_HORIZON_DAYS = int(os.environ.get("CONSOLE_TIME_HORIZON_DAYS", "365"))
# Chargeback: the currency every price is in, and the price of a GPU-hour per priority class where a
# pool sets none (scheduling.GpuHourPrice overrides per pool and class).
CONSOLE_CURRENCY = os.environ.get("CONSOLE_CURRENCY", "USD")
CONSOLE_DEFAULT_GPU_HOUR_PRICES = {
    "training": os.environ.get("CONSOLE_PRICE_TRAINING", "2.50"),
    "inference": os.environ.get("CONSOLE_PRICE_INFERENCE", "2.00"),
    "best-effort": os.environ.get("CONSOLE_PRICE_BEST_EFFORT", "0.80"),
}
# The design import takes a whole ibnetdiscover dump (about 1 MB per 2,000 HCAs): its own limit.
CONSOLE_MAX_IMPORT_BYTES = int(os.environ.get("CONSOLE_MAX_IMPORT_BYTES", str(64 * 1024 * 1024)))
# An import larger than this (dump + node-name map + host types) is a background job with progress
# (designer.import_jobs): a web request never parses for more than a fraction of a second.
CONSOLE_IMPORT_INLINE_BYTES = int(os.environ.get("CONSOLE_IMPORT_INLINE_BYTES", str(256 * 1024)))
# Idempotency-Key (console.tenancy.idempotency): how long a key replays its answer, and how long a
# request waits for a concurrent one with the same key before answering 409 in progress.
IDEMPOTENCY_KEY_TTL_HOURS = float(os.environ.get("IDEMPOTENCY_KEY_TTL_HOURS", "24"))
IDEMPOTENCY_WAIT_S = float(os.environ.get("IDEMPOTENCY_WAIT_S", "10"))
# The UFM-compatible P_Key API (console/ufm, docs/api.md): the fabric /ufmRest/ serves (empty: the
# only fabric), and how long a call waits for its change to be verified on the ports.
UFM_API_FABRIC = os.environ.get("CONSOLE_UFM_FABRIC", "")
UFM_API_WAIT_S = float(os.environ.get("CONSOLE_UFM_API_WAIT_S", "120"))
# Virtual port GUIDs (SR-IOV VFs of pods, console/fabric/opensm/vguids.py): the console-wide 4-byte
# prefix of every reservation's vGUID range (ib-kubernetes's GUID pool), e.g. 02:c0:ff:ee.
VGUID_PREFIX = os.environ.get("CONSOLE_VGUID_PREFIX", "02:c0:ff:ee")

# The REST API: DRF's and drf-spectacular's settings (console/conf/api.py).
from console.conf.api import REST_FRAMEWORK, SPECTACULAR_SETTINGS  # noqa: E402, F401

# --- static and frontend ----------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "static"
FRONTEND_DIST = PACKAGE_DIR / "web" / "dist"  # built by frontend/ (npm run build), shipped in the wheel
STATICFILES_DIRS = [FRONTEND_DIST] if FRONTEND_DIST.exists() else []
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
SERVESTATIC_USE_FINDERS = True
SERVESTATIC_AUTOREFRESH = DEBUG
DJANGO_VITE = {
    "default": {
        "dev_mode": env_bool("VITE_DEV_MODE", False),
        "manifest_path": FRONTEND_DIST / "manifest.json",
        "static_url_prefix": "",
    }
}

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- security ---------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the frontend reads it to send X-CSRFToken
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

# Logging: quiet by default, problems always printed (console/conf/logs.py).
from console.conf.logs import LOG_LEVEL, LOGGING, NOISY_LOGGERS  # noqa: E402, F401

# Slurm mirror (scheduling.slurm_mirror): the slurm.conf of the controller that receives the
# reservations as advance reservations; empty (the default) mirrors nothing.
SLURM_MIRROR_CONF = os.environ.get("SLURM_MIRROR_CONF", "")

CELERY_BEAT_SCHEDULE = {
    "tenancy-prune-expired-tokens": {"task": "tenancy.prune_expired_tokens", "schedule": 3600.0},
    "tenancy-prune-idempotency-keys": {"task": "tenancy.prune_idempotency_keys", "schedule": 3600.0},
    "fabric-reap-stuck-changes": {"task": "fabric.reap_stuck_changes", "schedule": 60.0},
    "power-reap-stuck": {"task": "power.reap_stuck", "schedule": 60.0},
    "power-apply-policies": {"task": "power.apply_policies", "schedule": 60.0},
    "scheduling-tick": {"task": "scheduling.tick", "schedule": 10.0},
    "scheduling-slurm-sync": {"task": "scheduling.slurm_sync", "schedule": 10.0},
    # Fallback when no `manage.py collector` process runs (skips while one heartbeats).
    "telemetry-collect": {"task": "telemetry.collect", "schedule": 5.0},
    "telemetry-prune": {"task": "telemetry.prune", "schedule": 60.0},
    "notify-redeliver": {"task": "notify.redeliver", "schedule": 60.0},
}

# Agents on the subnet-manager hosts (console/fabric/agents): they heartbeat every
# AGENT_HEARTBEAT_S; one silent for AGENT_SILENT_AFTER_S is not used and raises an alarm; a call
# to an agent (a push) may take AGENT_CALL_TIMEOUT_S.
# Where the agents of the labs this host runs connect (``manage.py lab up``; ``manage.py up``
# gives its own address).
CONSOLE_URL = os.environ.get("CONSOLE_URL", "http://127.0.0.1:8000")
AGENT_HEARTBEAT_S = float(os.environ.get("CONSOLE_AGENT_HEARTBEAT_S", "5"))
AGENT_SILENT_AFTER_S = float(os.environ.get("CONSOLE_AGENT_SILENT_AFTER_S", "15"))
AGENT_CALL_TIMEOUT_S = float(os.environ.get("CONSOLE_AGENT_CALL_TIMEOUT_S", "240"))
CELERY_BEAT_SCHEDULE["telemetry-agent-watch"] = {"task": "telemetry.agent_watch", "schedule": AGENT_HEARTBEAT_S * 2}

# Every fabric's applied state is verified on the wire this often between changes (and pushed
# again when the ports lost it): console.fabric.tasks.verify_all_task. 0 turns it off.
FABRIC_VERIFY_S = float(os.environ.get("CONSOLE_FABRIC_VERIFY_S", "30"))
if FABRIC_VERIFY_S > 0:
    CELERY_BEAT_SCHEDULE["fabric-verify-all"] = {"task": "fabric.verify_all", "schedule": FABRIC_VERIFY_S}

# The fabric validation suite (console/telemetry/validation.py) runs on every fabric this often; 0: off.
FABRIC_VALIDATE_S = float(os.environ.get("CONSOLE_FABRIC_VALIDATE_S", "3600"))
if FABRIC_VALIDATE_S > 0:
    CELERY_BEAT_SCHEDULE["telemetry-validate-all"] = {"task": "telemetry.validate_all", "schedule": FABRIC_VALIDATE_S}

# The isolation audit (console/fabric/isolation.py): every fabric every this many seconds (and
# after each push); 0 turns the schedule off. Drift diffs are cut at this many characters.
ISOLATION_AUDIT_S = float(os.environ.get("CONSOLE_ISOLATION_AUDIT_S", "60"))
ISOLATION_DRIFT_MAX_CHARS = 20000
if ISOLATION_AUDIT_S > 0:
    CELERY_BEAT_SCHEDULE["telemetry-isolation-audits"] = {
        "task": "telemetry.isolation_audits",
        "schedule": ISOLATION_AUDIT_S,
    }

# Live telemetry (console/telemetry): sweep interval of the collector, how often averaged samples
# are stored, how long raw and minute samples are kept, error alarm thresholds (errors per sweep
# to open, to clear), the lab traffic model on/off.
TELEMETRY_INTERVAL_S = float(os.environ.get("TELEMETRY_INTERVAL_S", "1.0"))
TELEMETRY_STORE_INTERVAL_S = float(os.environ.get("TELEMETRY_STORE_INTERVAL_S", "10"))
TELEMETRY_RAW_RETENTION_S = float(os.environ.get("TELEMETRY_RAW_RETENTION_S", "3600"))
TELEMETRY_MINUTE_RETENTION_S = float(os.environ.get("TELEMETRY_MINUTE_RETENTION_S", "604800"))
TELEMETRY_ERROR_OPEN = int(os.environ.get("TELEMETRY_ERROR_OPEN", "10"))
TELEMETRY_ERROR_CLEAR = int(os.environ.get("TELEMETRY_ERROR_CLEAR", "0"))
TELEMETRY_ERROR_CLEAR_SWEEPS = int(os.environ.get("TELEMETRY_ERROR_CLEAR_SWEEPS", "5"))
TELEMETRY_LAB_TRAFFIC = env_bool("TELEMETRY_LAB_TRAFFIC", True)
# /metrics: an operator/auditor session, or this bearer token (Prometheus scrape config).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")

# Notifications (console/notify): webhook POST timeout, attempts per delivery and Celery's
# exponential backoff (factor and cap, seconds), the lead of ``reservation.expiring``, whether
# webhook URLs may resolve to private/loopback addresses (the demo's and tests' receivers are
# local; a production console should leave it off), and e-mail (the console backend by default).
NOTIFY_WEBHOOK_TIMEOUT_S = float(os.environ.get("NOTIFY_WEBHOOK_TIMEOUT_S", "5"))
NOTIFY_WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("NOTIFY_WEBHOOK_MAX_ATTEMPTS", "6"))
NOTIFY_WEBHOOK_BACKOFF_S = int(os.environ.get("NOTIFY_WEBHOOK_BACKOFF_S", "10"))
NOTIFY_WEBHOOK_BACKOFF_MAX_S = int(os.environ.get("NOTIFY_WEBHOOK_BACKOFF_MAX_S", "600"))
NOTIFY_EXPIRING_LEAD_S = int(os.environ.get("NOTIFY_EXPIRING_LEAD_S", "1800"))
NOTIFY_ALLOW_PRIVATE_URLS = env_bool("NOTIFY_ALLOW_PRIVATE_URLS", False)
# Demo only: the one local URL allowed anyway, the demo's own receiver (console/notify/demo_sink.py);
# ``manage.py up`` sets it on a seeded demo. Empty: none.
NOTIFY_DEMO_SINK_URL = os.environ.get("NOTIFY_DEMO_SINK_URL", "")
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "IB console <console@localhost>")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)

# Fabric push pipeline (console/fabric/changes/pipeline.py): a change's database lease lasts this
# long without renewal (renewed at every step), a change is tried at most this many times, and
# a queued change older than this is re-published in case its task was lost.
FABRIC_CHANGE_LEASE_S = float(os.environ.get("FABRIC_CHANGE_LEASE_S", "120"))
FABRIC_CHANGE_MAX_ATTEMPTS = int(os.environ.get("FABRIC_CHANGE_MAX_ATTEMPTS", "3"))
FABRIC_CHANGE_REPUBLISH_S = float(os.environ.get("FABRIC_CHANGE_REPUBLISH_S", "300"))
# Sites (console/fabric/sites.py): every worker writes its queues' heartbeat this often; a site
# whose queue has no heartbeat this recent is unreachable (its changes wait in its queue).
SITE_HEARTBEAT_INTERVAL_S = float(os.environ.get("SITE_HEARTBEAT_INTERVAL_S", "15"))
SITE_UNREACHABLE_AFTER_S = float(os.environ.get("SITE_UNREACHABLE_AFTER_S", "90"))
# `fabric compare` (CLI, API, page) discovers afresh when its stored discovery is older than this
# or OpenSM has ended a heavy sweep since (console/fabric/discovery/freshness.py).
FABRIC_COMPARE_MAX_AGE_S = float(os.environ.get("FABRIC_COMPARE_MAX_AGE_S", "10"))
# A page or API compare that needs a new discovery queues it (a worker runs it through the
# fabric's agent) and waits this long for it before answering 202 with the job to follow.
FABRIC_COMPARE_WAIT_S = float(os.environ.get("FABRIC_COMPARE_WAIT_S", "20"))

# === LOGIN AND API THROTTLING (issue 14: brute force) ==========================================
# django-axes: a username with this many failed logins from one client address within the
# cool-off is locked out *for that address* until the cool-off has passed or an operator unlocks
# it (page "Locked logins"; audited: login.lockout, login.unlock). An address is never locked (many
# operators share a proxy or a jump host): one with CONSOLE_LOGIN_ADDRESS_LIMIT failed logins is
# throttled instead, its wrong guesses answered 429 + Retry-After while a right password of an
# account not locked there still signs in (console/tenancy/logins.py). Failures during a lockout
# do not extend it.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Single sign-on: an LDAP directory and an OpenID Connect provider (console/conf/sso.py), both
# before the local accounts, which stay for break-glass.
from console.conf import sso as _sso  # noqa: E402
from console.conf.sso import *  # noqa: E402, F403 (its __all__: the CONSOLE_LDAP_*, CONSOLE_OIDC_*, OIDC_* settings)

globals().update(_sso.ldap_django_settings())  # django-auth-ldap's AUTH_LDAP_*, when a directory is set
AUTHENTICATION_BACKENDS[1:1] = _sso.BACKENDS
AXES_FAILURE_LIMIT = int(os.environ.get("CONSOLE_LOGIN_FAILURE_LIMIT", "10"))
AXES_COOLOFF_TIME = float(os.environ.get("CONSOLE_LOGIN_COOLOFF_MINUTES", "15")) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # the pair: another address is not locked
CONSOLE_LOGIN_ADDRESS_LIMIT = int(os.environ.get("CONSOLE_LOGIN_ADDRESS_LIMIT", "30"))
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "console.web.views.login_locked_out"
AXES_CLIENT_IP_CALLABLE = "console.tenancy.throttling.client_address"
AXES_ENABLE_ADMIN = False
AXES_DISABLE_ACCESS_LOG = True  # no row per successful login: the audit log is the record
AXES_VERBOSE = False
# DRF throttling: per client address for requests without valid credentials ("anon", also counts
# failed bearer tokens), per user for session requests ("session"), per API token ("token"), and
# design computations per user or token ("plan").
# "N/second|minute|hour|day"; an empty value switches that limit off. CONSOLE_TRUSTED_PROXIES is
# the number of reverse proxies in front whose X-Forwarded-For entries are believed (default 0).
CONSOLE_THROTTLE_RATES = {
    "anon": os.environ.get("CONSOLE_THROTTLE_ANON", "300/minute"),
    "session": os.environ.get("CONSOLE_THROTTLE_SESSION", "6000/minute"),
    "token": os.environ.get("CONSOLE_THROTTLE_TOKEN", "6000/minute"),
    # design plans, compares and graph validations per user or token (seconds of CPU each)
    "plan": os.environ.get("CONSOLE_THROTTLE_PLAN", "60/minute"),
    # a tenant's virtual-GUID writes (each is a change of the fabric; a burst folds into one push)
    "vguid": os.environ.get("CONSOLE_THROTTLE_VGUID", "120/minute"),
}
# Throttle counters are shared by every web process: Redis when configured.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": "throttle"}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}
    ),
}

# === CONTENT SECURITY POLICY (issue 14: headers) ===============================================
# Strict: scripts and styles only from the console's own origin, no 'unsafe-inline' anywhere. The
# Vite bundles are files; JSON data blocks (json_script) are not executed. The one inline style
# element allowed by hash is the one Cytoscape.js inserts ('.__________cytoscape_container
# { position: relative; }'). /api/docs/ (Swagger UI) adds the hash of its own style block.
CYTOSCAPE_STYLE = ".__________cytoscape_container { position: relative; }"
CYTOSCAPE_STYLE_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(CYTOSCAPE_STYLE.encode()).digest()).decode() + "'"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", CYTOSCAPE_STYLE_HASH],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# === ERRORS (issue 14: debug pages) =============================================================
# 400/403/404/500 are the console's own pages (console/web/templates/web/error.html), and under
# /api/ the one JSON error body (console.urls' handlers, console.tenancy's ApiErrorBodyMiddleware).
CSRF_FAILURE_VIEW = "console.web.views.csrf_failure"
