import subprocess

REPO = "/app/shop"
OLD_MAIN = "3645b0ce8739aeec7b50a6a90fb519d47d7feeb6"      # "Add stock check"
REFUND = "74e9c9ed31a0012dc71a90915f31f04664f4dbc2"        # "Add refund support"
PAYMENTS = "49f36d6255a3f676418b2ab6cf807a42b75d41d6"      # "Add payments module"
DECOY = "cbaf5ae7903a125706c14cbc79d9fc72052203e0"         # "WIP: try exotic fruit"


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_branch_recreated_at_original_commit():
    assert git("rev-parse", "refs/heads/feature/payments") == REFUND
    assert git("rev-parse", "feature/payments~1") == PAYMENTS


def test_main_is_merge_commit():
    head = git("rev-parse", "refs/heads/main")
    parents = git("log", "-1", "--format=%P", head).split()
    assert parents == [OLD_MAIN, REFUND]
    assert git("log", "-1", "--format=%s", head) == "Merge branch 'feature/payments'"


def test_decoy_not_merged():
    r = subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", DECOY, "main"])
    assert r.returncode != 0
    assert "durian" not in git("show", "main:shop.py")


def test_tag():
    assert git("rev-parse", "v1.1^{commit}") == git("rev-parse", "main")


def test_merged_content_works():
    src = git("show", "main:payments.py")
    assert "def refund" in src
    ns = {}
    exec(compile(src, "payments.py", "exec"), ns)
    p = ns["Payment"](10)
    p.capture()
    assert ns["refund"](p, 4) == 4 and p.amount == 6
    assert "def in_stock" in git("show", "main:shop.py")


def test_worktree_clean_on_main():
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain", "--untracked-files=no") == ""
    with open(f"{REPO}/payments.py") as f:
        assert "def refund" in f.read()
