"""The README's example runs against a real Manager and fails loudly on a wrong byte."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "roundtrip.py"


def run_example(*args):
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120)


def test_roundtrip_verifies_every_byte(manager):
    result = run_example("--data-dir", str(manager.data_dir), "--pages", "8", "--page-bytes", "8192")
    assert result.returncode == 0, result.stderr
    assert '"ok": true' in result.stdout and "OK: every byte verified" in result.stderr
    over_tcp = run_example("--data-dir", str(manager.data_dir), "--tcp", f"127.0.0.1:{manager.tcp_port}",
                           "--pages", "8", "--page-bytes", "8192")
    assert over_tcp.returncode == 0, over_tcp.stderr


def test_roundtrip_fails_on_a_mismatch(manager):
    # Published once with these pages; a second run with another page size names the same keys (same tokens) in a
    # different namespace, so instead corrupt the published bytes through the pool and expect the example to fail.
    from orbitkv import OrbitKvClient, hashing, identity, pb

    sys.path.insert(0, str(EXAMPLE.parent))
    import roundtrip

    tokens = [(i * 7919) % 32000 for i in range(4 * roundtrip.BLOCK_TOKENS + 5)]
    keys = hashing.chain(tokens, roundtrip.BLOCK_TOKENS)
    with OrbitKvClient.from_data_dir(manager.data_dir) as client:
        engine = identity("orbitkv-example/roundtrip", "example:NHD", "layers=1;dtype=u8", roundtrip.BLOCK_TOKENS,
                          [(0, pb.FULL_ATTENTION, 4096)])
        with client.register(engine) as session:
            wrong = [(0, key, bytes(4096)) for key in keys]  # zeros where the example expects its pattern
            session.publish(wrong)
            result = run_example("--data-dir", str(manager.data_dir), "--pages", "4", "--page-bytes", "4096")
    assert result.returncode == 1
    assert "bytes differ" in result.stderr and '"ok": false' in result.stdout


def test_roundtrip_without_a_manager_says_so(tmp_path):
    result = run_example("--data-dir", str(tmp_path))
    assert result.returncode == 1 and "no Manager data directory" in result.stderr
