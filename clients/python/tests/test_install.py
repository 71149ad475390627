"""Installing into an engine's environment and refusing what would break it, each in a fresh Python process.

``pip install`` exactly as clients/python/README.md shows it, offline, into a virtual environment that sees the system
packages; a missing native CRC32C refused with what to install; stand-ins only when the engine module is absent (an
engine that is installed but fails to import surfaces its error); an engine version outside the supported range
refused with a message naming it; protobuf runtimes outside the stubs' range refused."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orbitkv._proto import check_protobuf_runtime

PACKAGE = Path(__file__).resolve().parents[1]
PYTHON = "/usr/bin/python3"


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


def test_pip_install_offline_into_a_venv_with_system_packages(tmp_path):
    source = tmp_path / "src"
    # A copy, so the build's scratch (build/, *.egg-info) never lands in the checkout.
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "V"
    assert run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)]).returncode == 0
    installed = run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-build-isolation", str(source)])
    assert installed.returncode == 0, installed.stdout + installed.stderr
    probe = textwrap.dedent("""
        import orbitkv, orbitkv.vllm, orbitkv.sglang
        from orbitkv import checksum, pb
        print(orbitkv.__file__)
        print(checksum.require_native())
        print(orbitkv.vllm.VLLM_UNAVAILABLE_CAUSE)
        print(pb.InstanceIdentity(model_fingerprint="m").SerializeToString().hex())
    """)
    out = run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, native, vllm_cause, encoded = out.stdout.splitlines()
    assert where.startswith(str(venv)), f"imported from {where}, not from the venv"
    assert native == "crc32c"
    assert vllm_cause == "the vllm module is not installed"
    assert encoded == "0a016d"
    shown = run([str(venv / "bin" / "pip"), "show", "orbitkv"])
    assert "Requires: cbor2, crc32c, grpcio, protobuf" in shown.stdout


def test_without_a_native_crc32c_the_client_refuses_with_what_to_install():
    code = textwrap.dedent("""
        import sys
        for name in ("crc32c", "crcmod", "crcmod.predefined", "crcmod.crcmod"):
            sys.modules[name] = None  # as if neither package were installed
        from orbitkv import OrbitKvClient, checksum
        assert checksum.IMPLEMENTATION is None
        try:
            OrbitKvClient("unix:/nonexistent", "token")
        except checksum.NativeCrc32cMissingError as e:
            print(e)
        else:
            raise SystemExit("accepted the pure-Python CRC32C")
    """)
    out = run([PYTHON, "-c", code], cwd=PACKAGE)
    assert out.returncode == 0, out.stderr
    assert "python3-crc32c" in out.stdout and "pip install crc32c" in out.stdout


def fake_engine(root: Path, name: str, version: str, broken: bool = False):
    """An installed engine package: a real module named like the engine, at a version, optionally broken."""
    package = root / name
    package.mkdir()
    body = f"__version__ = {version!r}\n"
    if broken:
        body += "import a_dependency_this_engine_lacks\n"
    (package / "__init__.py").write_text(body)


@pytest.mark.parametrize("engine,module", [("vllm", "orbitkv.vllm"), ("sglang", "orbitkv.sglang")])
def test_an_installed_engine_that_fails_to_import_is_not_replaced_by_stand_ins(tmp_path, engine, module):
    fake_engine(tmp_path, engine, "0.11.0", broken=True)
    out = run([PYTHON, "-c", f"import {module}"], cwd=PACKAGE, env={"PYTHONPATH": f"{tmp_path}:{PACKAGE}"})
    assert out.returncode != 0
    assert "a_dependency_this_engine_lacks" in out.stderr


@pytest.mark.parametrize("engine,module,version,shown", [
    ("vllm", "orbitkv.vllm", "0.8.5", "vLLM 0.8.5"),
    ("sglang", "orbitkv.sglang", "0.4.9.post2", "SGLang 0.4.9.post2"),
])
def test_an_unsupported_engine_version_is_refused_clearly(tmp_path, engine, module, version, shown):
    fake_engine(tmp_path, engine, version)
    out = run([PYTHON, "-c", f"import {module}"], cwd=PACKAGE, env={"PYTHONPATH": f"{tmp_path}:{PACKAGE}"})
    assert out.returncode != 0
    assert "UnsupportedEngineError" in out.stderr and shown in out.stderr and "supports" in out.stderr


def test_stand_ins_only_when_the_engine_is_absent():
    out = run([PYTHON, "-c", "import orbitkv.vllm, orbitkv.sglang; "
                             "print(orbitkv.vllm.VLLM_UNAVAILABLE_CAUSE); print(orbitkv.sglang.SGLANG_UNAVAILABLE_CAUSE)"],
              cwd=PACKAGE, env={"PYTHONPATH": str(PACKAGE)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["the vllm module is not installed", "the sglang module is not installed"]


@pytest.mark.parametrize("version,accepted", [("3.20.3", False), ("4.21.12", True), ("5.29.3", True),
                                               ("6.31.1", True), ("7.34.0", False)])
def test_protobuf_runtimes_outside_the_stubs_range_are_refused(version, accepted):
    if accepted:
        check_protobuf_runtime(version)
    else:
        with pytest.raises(ImportError, match="generate-stubs.sh"):
            check_protobuf_runtime(version)
