import configparser
import re

PATH = "/app/config/app.ini"

EXPECTED = {
    "server": {"host": "0.0.0.0", "port": "9090", "workers": "8", "keepalive_timeout": "5"},
    "database": {"host": "db.internal", "port": "5432", "name": "orders", "user": "orders_app", "pool_size": "20"},
    "cache": {"enabled": "true", "ttl": "60"},
    "features": {"new_checkout": "true"},
    "logging": {"level": "INFO", "file": "/var/log/orders/app.log"},
}

EXPECTED_COMMENTS = [
    "# Main configuration of the order service.",
    "# Managed by hand: keep the comments, they document the settings.",
    "# Address and port the HTTP listener binds to.",
    "# Seconds before an idle keep-alive connection is closed.",
    "# Primary database (PostgreSQL).",
    "# Time to live of cached entries, in seconds.",
]


def parse():
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    with open(PATH) as f:
        cp.read_file(f)
    return cp


def test_values():
    cp = parse()
    assert cp.sections() == list(EXPECTED)
    for sec, kv in EXPECTED.items():
        assert dict(cp[sec]) == kv, sec


def test_comments_kept_in_order():
    text = open(PATH).read()
    comments = [l.strip() for l in text.splitlines() if l.strip().startswith(("#", ";"))]
    assert comments == EXPECTED_COMMENTS


def test_key_value_format():
    for line in open(PATH).read().splitlines():
        s = line.strip()
        if s and not s.startswith(("#", ";", "[")):
            assert re.fullmatch(r"[A-Za-z_]+ = \S.*", s), line
