"""`pip install <clone>` into a fresh venv, as a user installs mci
(docs/pytorch.md, "Install with pip"), then mci used from another folder
as that user would. Usage, with the torch tier's interpreter
(scripts/torch-venv.sh):

    pip_install.py REPO VERSION

The venv is made in a temporary folder outside the clone and sees the
tier's torch through a .pth file naming the tier venv's site-packages (a
venv's --system-site-packages would show the base interpreter's
site-packages, which hold no torch; installing torch again would download
GBs). The venvs are made without pip of their own (ensurepip costs 8-12 s
a venv): the tier's pip installs into each with --python VENV/bin/python,
which runs that pip under the venv's interpreter, as the venv's own would.
pip runs with its default build isolation and installs the build
backend from scripts/wheelhouse.sh's folder (--no-index: nothing is
downloaded). Then, from another folder,
with the venv's bin first on PATH (an activated venv):
- `mcirun --help` runs, and `mcirun` is the venv's;
- a 2-rank job under that mcirun calls init_process_group("mci") without
  importing mci_torch (torch's entry point registers it) and all_reduces;
  its rank 0 says where mci_torch came from: the venv, with PATH == "ext"
  (the C++ extension, built for this torch), libmci from inside the
  package, and the installed distribution's version is mci's (project()
  in CMakeLists.txt).
Then into a second venv, without torch: the wheel is built without the
extension, with mcirun and mci_torch, and pip's log (-v) says why.
Exits 77 (skipped, with the reason) where the torch tier or the wheels
cannot be had. Ends its children and removes its folder whatever happens."""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SKIP = 77
# Variables of the caller's shell that would make the venv's Python or
# mcirun find something else than what the wheel installed.
FOREIGN = ("PYTHONPATH", "PYTHONHOME", "MCI_LIBRARY", "MCI_TORCH_PATH", "MCI_PYTHON", "PYTHON_EXEC", "VIRTUAL_ENV",
           "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PIP_REQUIRE_VIRTUALENV")


class Failure(Exception):
    pass


def skip(why):
    print(f"skipped: {why}")
    sys.exit(SKIP)


def run(cmd, timeout, **kw):
    """cmd's exit code and output (stdout and stderr together); past
    timeout, SIGTERM (mcirun ends its ranks on it), then SIGKILL to its
    whole session, and a Failure. Says how long it took (this test's time
    is mostly these commands')."""
    started = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                         **kw)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        raise Failure(f"{' '.join(map(str, cmd))} did not finish in {timeout} s (killed)")
    print(f"{time.monotonic() - started:5.1f} s: {' '.join(map(str, cmd))[:160]}", flush=True)
    return p.returncode, out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ccache_settings(repo):
    """ccache's variables as scripts/cache-root.sh sets them for
    scripts/test.sh (its cache outside the clone; kept where the caller set
    them already), so the wheel's build reuses CI's objects."""
    script = ('. scripts/cache-root.sh && mci_use_ccache && '
              'printf "%s\\n" "${CCACHE_DIR-}" "${CCACHE_BASEDIR-}" "${CCACHE_NOHASHDIR-}" "${CCACHE_MAXSIZE-}"')
    out = subprocess.run(["bash", "-c", script], cwd=repo, check=True, stdout=subprocess.PIPE, text=True).stdout
    names = ("CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR", "CCACHE_MAXSIZE")
    return {n: v for n, v in zip(names, out.split("\n")) if v}


def pip_install(python, wheelhouse, repo):
    """The tier's pip installing repo into python's environment, as that
    environment's own pip would (--python runs it under python)."""
    return [sys.executable, "-m", "pip", "--python", python, "install", "-v", "--disable-pip-version-check",
            "--no-index", "--find-links", wheelhouse, "--no-cache-dir", repo]


def check(cond, what, output=""):
    if not cond:
        raise Failure(what + (f"\n--- output ---\n{output}" if output else ""))


def main():
    repo, version = pathlib.Path(sys.argv[1]).resolve(), sys.argv[2]
    try:
        import torch
    except ImportError as e:
        skip(f"{sys.executable} cannot import torch ({e}): scripts/torch-venv.sh makes the torch tier")
    major_minor = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if major_minor < (2, 14):
        skip(f"torch {torch.__version__} has no backend entry points (2.14+); the torch tier is scripts/torch-pin.txt's")
    wheelhouse = pathlib.Path(subprocess.run([repo / "scripts" / "wheelhouse.sh", "--dir"], check=True,
                                             stdout=subprocess.PIPE, text=True).stdout.strip())
    if not list(wheelhouse.glob("scikit_build_core-*.whl")):
        skip(f"no scikit-build-core wheel in {wheelhouse}: scripts/wheelhouse.sh downloads it")
    ccache = ccache_settings(repo)

    base_env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="mci-pip-install-"))
    try:
        venv = tmp / "venv"
        rc, out = run([sys.executable, "-m", "venv", "--without-pip", venv], 120, env=base_env)
        if rc != 0:
            skip(f"{sys.executable} -m venv failed (python3-venv missing?):\n{out}")
        py = venv / "bin" / "python"
        venv_site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
        (pathlib.Path(venv_site) / "mci-test-torch-tier.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

        # The user's install, with pip's defaults (build isolation); -v for
        # the configure's lines. No pip cache: nothing is downloaded
        # (--no-index), and pip would keep the built wheel and install it
        # again, unbuilt, for a clone whose folder is named like NAME-VERSION.
        pip_env = dict(base_env, **ccache)
        start = time.monotonic()
        rc, out = run(pip_install(py, wheelhouse, repo), 1500, env=pip_env, cwd=tmp)
        took = time.monotonic() - start
        (tmp / "pip.log").write_text(out)
        check(rc == 0, f"pip install {repo} failed (exit {rc})", "\n".join(out.splitlines()[-80:]))
        print(f"pip install {repo}: {took:.0f} s")
        want = f"mci_torch's C++ extension is built for torch {torch.__version__}"
        check(want in out, f"pip's build log lacks {want!r}: the wheel was built without the extension",
              "\n".join(line for line in out.splitlines() if "mci" in line))

        # The user, in another folder, with the venv activated.
        elsewhere = tmp / "elsewhere"
        elsewhere.mkdir()
        env = dict(base_env, PATH=f"{venv / 'bin'}{os.pathsep}{base_env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
        mcirun = shutil.which("mcirun", path=env["PATH"])
        check(mcirun == str(venv / "bin" / "mcirun"), f"mcirun on the venv's PATH is {mcirun}, not the venv's")
        rc, out = run(["mcirun", "--help"], 30, env=env, cwd=elsewhere)
        check(rc == 0 and "--nproc_per_node" in out, f"the venv's mcirun --help: exit {rc}", out)

        worker = elsewhere / "worker.py"
        shutil.copy(HERE / "pip_install_worker.py", worker)
        rc, out = run(["mcirun", "--nproc_per_node=2", f"--master_port={free_port()}", worker], 120, env=env,
                      cwd=elsewhere)
        print(out)
        check(rc == 0, f"the 2-rank job under the venv's mcirun: exit {rc}")
        for r in (0, 1):
            line = f"rank {r}: backend mci through the entry point, PATH=ext"
            check(line in out, f"no line {line!r} in the job's output")
        probe = [line.split("mci_torch: ", 1)[1] for line in out.splitlines() if "mci_torch: {" in line]
        check(len(probe) == 1, "rank 0 did not say where mci_torch came from (a line 'mci_torch: {...}')", out)
        got = json.loads(probe[0])
        check(got["path"] == "ext", f"mci_torch.PATH is {got['path']!r}, want 'ext' (the C++ extension)", out)
        for key in ("file", "ext", "lib"):
            check(got[key] and pathlib.Path(got[key]).resolve().is_relative_to(venv.resolve()),
                  f"mci_torch's {key} ({got[key]}) is not inside the venv")
        check(pathlib.Path(got["lib"]).is_file(), f"mci_torch._libpath.LIBRARY ({got['lib']}) does not exist")
        check(got["version"] == version, f"the installed mci is version {got['version']}, mci is {version}")

        # A venv without torch: the wheel is built all the same, without
        # the extension, and the build log says why.
        bare = tmp / "bare"
        rc, out = run([sys.executable, "-m", "venv", "--without-pip", bare], 120, env=base_env)
        check(rc == 0, f"{sys.executable} -m venv {bare}: exit {rc}", out)
        rc, out = run(pip_install(bare / "bin" / "python", wheelhouse, repo), 1500, env=pip_env, cwd=tmp)
        check(rc == 0, f"pip install {repo} into a venv without torch failed (exit {rc})",
              "\n".join(out.splitlines()[-80:]))
        want = "no C++ extension for mci_torch"
        check(want in out and "No module named 'torch'" in out,
              f"pip's build log in a venv without torch lacks {want!r} and the reason",
              "\n".join(line for line in out.splitlines() if "mci" in line))
        package = next((bare / "lib").glob("python3*/site-packages/mci_torch"), None)
        check(package is not None and (package / "__init__.py").is_file() and not list(package.glob("_C.*")),
              f"the wheel without torch: mci_torch should be installed without _C ({package})")
        check((bare / "bin" / "mcirun").is_file(), "the wheel without torch installed no mcirun")
        print("pip install into a venv without torch: built without the extension, and said so")
    except Failure as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok: pip install . gives mcirun, mci_torch with its extension, and the backend by entry point")
    return 0


if __name__ == "__main__":
    sys.exit(main())
