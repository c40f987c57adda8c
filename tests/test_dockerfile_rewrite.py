"""`COPY --chmod` and `RUN` here-documents for the classic builder (environments/dockerfile.py).
The conformance task `copy-chmod` builds and runs such a Dockerfile; these pin down each form of
the rewrite."""

from __future__ import annotations

import json

import pytest

from tbscale.environments.dockerfile import for_classic_builder


def test_a_dockerfile_without_buildkit_flags_is_left_alone() -> None:
    assert for_classic_builder("FROM debian\nCOPY --chown=1:1 a /b\nRUN echo \\\n  hi\n") is None


def test_one_file_to_a_path_checks_at_build_whether_the_path_is_a_folder() -> None:
    out = for_classic_builder("FROM debian\nCOPY --chmod=755 run.sh /usr/local/bin/run\n")
    assert out == ("FROM debian\nCOPY run.sh /usr/local/bin/run\n"
                   "RUN if [ -d /usr/local/bin/run ]; then chmod 755 /usr/local/bin/run/run.sh; "
                   "else chmod 755 /usr/local/bin/run; fi\n")


def test_several_files_into_a_folder_under_another_user() -> None:
    out = for_classic_builder("FROM debian\nUSER app\nCOPY --chown=app --chmod=0640 [\"a.txt\", \"b c.txt\", \"data/\"]\n")
    assert out.splitlines()[2:] == ['COPY --chown=app ["a.txt", "b c.txt", "data/"]', "USER root",
                                    "RUN chmod 0640 data/a.txt 'data/b c.txt'", "USER app"]


def test_several_sources_into_dot_get_the_slash_the_classic_builder_wants() -> None:
    assert for_classic_builder("FROM debian\nWORKDIR /app\nCOPY server.py persona.md .\n").splitlines()[-1] == \
        "COPY server.py persona.md ./"
    assert for_classic_builder("FROM debian\nCOPY [\"a\", \"b\", \"/dst\"]\n").splitlines()[-1] == 'COPY ["a", "b", "/dst/"]'
    assert for_classic_builder("FROM debian\nCOPY a b ./\nCOPY a /x\n") is None


def test_a_folder_source_gives_its_mode_to_the_destination_recursively() -> None:
    out = for_classic_builder("FROM debian\nCOPY --chmod=u+x scripts /opt/s\n", is_dir=lambda s: s == "scripts")
    assert out.splitlines()[-1] == "RUN chmod -R u+x /opt/s"


def test_link_is_dropped_and_from_stage_sources_are_files() -> None:
    out = for_classic_builder("FROM a AS build\nFROM debian\nCOPY --link --from=build --chmod=755 /out/tool /usr/bin/\n",
                              is_dir=lambda s: True)
    assert out.splitlines()[2:] == ["COPY --from=build /out/tool /usr/bin/", "RUN chmod 755 /usr/bin/tool"]


def test_the_user_is_reset_by_each_stage_and_json_form_and_globs_work() -> None:
    text = "FROM a\nUSER x\nFROM b\nCOPY --chmod=700 [\"*.sh\", \"/bin/\"]\n"
    assert for_classic_builder(text).splitlines()[3:] == ['COPY ["*.sh", "/bin/"]', "RUN chmod 700 /bin/*.sh"]


def test_continued_instructions_are_joined_before_rewriting() -> None:
    out = for_classic_builder("FROM debian\nCOPY --chmod=755 \\\n    run.sh \\\n    /r.sh\n")
    assert "RUN if [ -d /r.sh ]" in out and "--chmod" not in out


def test_a_mode_that_is_not_a_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="--chmod=\\$MODE: not a file mode"):
        for_classic_builder("FROM debian\nCOPY --chmod=$MODE a /b\n")


def test_a_run_with_a_here_document_becomes_one_exec_form_run_of_the_same_text() -> None:
    text = ("FROM debian\nRUN cat > /etc/app.yml << 'EOF'\nname: CI\n# not a comment here\n"
            "  run: ${{ matrix.os }}\nEOF\nRUN echo next\n")
    out = for_classic_builder(text).splitlines()
    assert out[0] == "FROM debian" and out[2:] == ["RUN echo next"]
    assert json.loads(out[1][len("RUN "):]) == [
        "/bin/sh", "-c", "cat > /etc/app.yml << 'EOF'\nname: CI\n# not a comment here\n  run: ${{ matrix.os }}\nEOF"]


def test_a_run_of_a_here_document_alone_runs_its_body_with_tabs_stripped_for_the_dash_form() -> None:
    out = for_classic_builder("FROM debian\nRUN <<-EOT\n\tset -e\n\techo a > /a\n\tEOT\n")
    assert json.loads(out.splitlines()[1][len("RUN "):]) == ["/bin/sh", "-c", "set -e\necho a > /a"]
    out = for_classic_builder("FROM debian\nRUN <<EOF\n\tkept\nEOF\n")
    assert json.loads(out.splitlines()[1][len("RUN "):])[2] == "\tkept"


def test_here_documents_run_in_the_stages_shell_and_several_follow_one_line() -> None:
    text = ("FROM a\nSHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\nRUN cat <<A >/a && cat <<B >/b\n1\nA\n2\nB\n"
            "FROM b\nRUN <<X\ntrue\nX\n")
    lines = for_classic_builder(text).splitlines()
    assert json.loads(lines[2][len("RUN "):]) == ["/bin/bash", "-o", "pipefail", "-c", "cat <<A >/a && cat <<B >/b\n1\nA\n2\nB"]
    assert lines[3] == "FROM b" and json.loads(lines[4][len("RUN "):]) == ["/bin/sh", "-c", "true"]


def test_what_is_not_a_here_document_is_left_alone() -> None:
    # no line ends it; a shift in arithmetic; a heredoc-looking word in an instruction that takes none
    assert for_classic_builder("FROM debian\nRUN cat <<EOF > /x\nline\n") is None
    assert for_classic_builder("FROM debian\nRUN echo $((1 << 4)) && cat <<< B\nENV A=<<B\nB\n") is None


def test_here_documents_the_classic_builder_cannot_take_say_they_require_buildkit() -> None:
    with pytest.raises(ValueError, match="line 2: COPY with a here-document requires BuildKit"):
        for_classic_builder("FROM debian\nCOPY <<EOF /etc/motd\nhi\nEOF\n")
    with pytest.raises(ValueError, match="line 3: RUN <<EOF with its own #! interpreter requires BuildKit"):
        for_classic_builder("FROM debian\n\nRUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n")
