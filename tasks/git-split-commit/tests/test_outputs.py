import subprocess

REPO = "/app/project"
INITIAL = "f31d256ba98ac09d8eaa1869a23c011306c89ac1"
TOKENIZER = "527cbc3155e676ed3475eb9e31518ca8fe8b8249"
FINAL_BLOBS = {
    "README.md": "3d0f5cf99d883d4f021cd9154d381b8761b51a2d",
    "calc/__init__.py": "e8356633bfa2a11c47182dac102d8dbfd4f115e9",
    "calc/cli.py": "e9a6c0398cc3cb3f8f650be6249748ae4e004d67",
    "calc/parser.py": "952dc10f88c1741efe670831a6c35f5487284e26",
    "calc/tokenizer.py": "07a7ecdf810059cab764ebf8c2c0832a9d5e0ca6",
    "tests/test_parser.py": "52ba6d69b802a8d88904345a0e6fa2c8c41c69fe",
}


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def changed_files(rev):
    return sorted(git("diff-tree", "--no-commit-id", "--name-only", "-r", rev).split())


def test_history_shape():
    log = git("log", "--format=%H|%P|%an <%ae>|%B%x00", "main").split("\x00")
    entries = [e.strip().split("|", 3) for e in log if e.strip()]
    assert [e[3].strip() for e in entries] == [
        "Add CLI entry point", "Add parser", "Fix typo in README", "Add tokenizer", "Initial layout"]
    assert all(len(e[1].split()) <= 1 for e in entries), "history must be linear"
    assert entries[3][0] == TOKENIZER and entries[4][0] == INITIAL
    assert entries[0][2] == "Ali Khan <ali@example.com>"
    assert entries[1][2] == "Sam Lee <sam@example.com>"
    assert entries[2][2] == "Sam Lee <sam@example.com>"


def test_commit_contents():
    assert changed_files("main~2") == ["README.md"]
    assert changed_files("main~1") == ["calc/parser.py", "tests/test_parser.py"]
    assert changed_files("main") == ["calc/cli.py"]
    assert git("show", "main~2:README.md").count("receive") == 1


def test_no_debug_log_in_history():
    assert git("log", "--format=%H", "main", "--", "debug.log") == ""


def test_final_tree():
    rows = git("ls-tree", "-r", "main").splitlines()
    blobs = {r.split("\t")[1]: r.split()[2] for r in rows}
    assert blobs == FINAL_BLOBS


def test_branches_and_worktree():
    assert git("for-each-ref", "--format=%(refname:short)", "refs/heads") == "main"
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain", "--untracked-files=no") == ""
