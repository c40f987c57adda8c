import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

BASE = "http://127.0.0.1:8080"


def req(method, path, body=None, base=BASE):
    r = urllib.request.Request(base + path, data=body.encode() if body is not None else None, method=method)
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def jreq(method, path, body=None, base=BASE):
    code, headers, raw = req(method, path, body, base)
    if raw:
        assert headers.get("Content-Type", "").startswith("application/json"), headers.get("Content-Type")
        return code, json.loads(raw)
    return code, None


def test_health():
    code, _, body = req("GET", "/health")
    assert code == 200 and body.strip() == b"ok"


def test_server_source_exists():
    assert os.path.isfile("/app/server.py")


def test_crud_cycle():
    k = "k-" + uuid.uuid4().hex[:8]
    assert jreq("GET", f"/kv/{k}") == (404, {"error": "not found"})
    assert jreq("PUT", f"/kv/{k}", "first value") == (201, {"key": k, "value": "first value"})
    assert jreq("GET", f"/kv/{k}") == (200, {"key": k, "value": "first value"})
    assert jreq("PUT", f"/kv/{k}", "späte Änderung ✓") == (200, {"key": k, "value": "späte Änderung ✓"})
    assert jreq("GET", f"/kv/{k}") == (200, {"key": k, "value": "späte Änderung ✓"})
    code, _, body = req("DELETE", f"/kv/{k}")
    assert code == 204 and body == b""
    assert jreq("DELETE", f"/kv/{k}") == (404, {"error": "not found"})
    assert jreq("GET", f"/kv/{k}") == (404, {"error": "not found"})


def test_list_sorted():
    for k in ("zeta", "alpha", "Mid_1"):
        assert jreq("PUT", f"/kv/{k}", k.upper())[0] in (200, 201)
    code, data = jreq("GET", "/kv")
    assert code == 200
    keys = data["keys"]
    assert keys == sorted(keys)
    assert {"zeta", "alpha", "Mid_1"} <= set(keys)


def test_bad_key_and_unknown_path():
    assert jreq("PUT", "/kv/" + "x" * 65, "v") == (400, {"error": "bad key"})
    assert jreq("GET", "/kv/bad.key") == (400, {"error": "bad key"})
    assert jreq("GET", "/kv/sp%20ace")[0] == 400
    assert req("GET", "/nope")[0] == 404


def test_persistence_file():
    assert jreq("PUT", "/kv/persisted", "on disk")[0] in (200, 201)
    with open("/app/data/kv.json") as f:
        data = json.load(f)
    assert data.get("persisted") == "on disk"


def test_concurrent_clients():
    # a client that sends half a request and then stalls must not block others
    s = socket.create_connection(("127.0.0.1", 8080), timeout=5)
    try:
        s.sendall(b"PUT /kv/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        time.sleep(0.3)
        t0 = time.time()
        code, _, body = req("GET", "/health")
        assert code == 200 and time.time() - t0 < 3
    finally:
        s.close()


def test_restart_keeps_data():
    # start a second instance of the agent's server on another port (patched copy) and check it loads kv.json
    src = open("/app/server.py").read()
    assert "8080" in src
    patched = src.replace("8080", "18089")
    path = "/tmp/server_copy_18089.py"
    with open(path, "w") as f:
        f.write(patched)
    p = subprocess.Popen([sys.executable, path], cwd="/app", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                if req("GET", "/health", base="http://127.0.0.1:18089")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert jreq("GET", "/kv/persisted", base="http://127.0.0.1:18089") == (200, {"key": "persisted", "value": "on disk"})
    finally:
        p.terminate()
        p.wait(timeout=5)
