"""The checked-in stubs describe exactly engine.proto; CRC32C agrees with Java's java.util.zip.CRC32C.

Stubs are checked in (so an engine host needs only grpcio and protobuf at run time, no protoc) and compared here,
semantically, with what Debian's protoc makes of engine.proto now: the serialized FileDescriptorProto must be equal,
and the gRPC stub must offer exactly the service's methods. A byte comparison of generated text would fail on any
other protoc release without the contract having changed; the descriptor cannot.
"""

import shutil
import subprocess
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2

from orbitkv import checksum as crc
from orbitkv._proto import engine_pb2, engine_pb2_grpc

ROOT = Path(__file__).resolve().parents[3]
PROTO_DIR = ROOT / "protocol" / "src" / "main" / "proto"


def test_checked_in_stubs_match_engine_proto(tmp_path):
    protoc = shutil.which("protoc")
    assert protoc, "protoc is missing: apt-get install protobuf-compiler (./scripts/test installs it)"
    descriptor_set = tmp_path / "engine.desc"
    subprocess.run([protoc, f"-Iorbitkv/_proto={PROTO_DIR}", f"--descriptor_set_out={descriptor_set}",
                    "orbitkv/_proto/engine.proto"], check=True, cwd=tmp_path)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes()).file[0]
    _drop_json_names(fresh.message_type)  # derived from field names; protoc's Python output leaves them out
    checked_in = descriptor_pb2.FileDescriptorProto.FromString(engine_pb2.DESCRIPTOR.serialized_pb)
    assert checked_in == fresh, "orbitkv/_proto is stale: run clients/python/generate-stubs.sh"

    service = fresh.service[0]
    channel = grpc.insecure_channel("unix:/nonexistent")  # no connection is made until a call
    try:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        offered = {name for name in vars(stub)}
    finally:
        channel.close()
    assert offered == {m.name for m in service.method}


def _drop_json_names(messages):
    for message in messages:
        for field in message.field:
            field.ClearField("json_name")
        _drop_json_names(message.nested_type)


def test_generation_is_reproducible(tmp_path):
    if not shutil.which("grpc_python_plugin"):
        pytest.fail("grpc_python_plugin is missing: apt-get install protobuf-compiler-grpc")
    subprocess.run([str(Path(__file__).resolve().parents[1] / "generate-stubs.sh"), str(tmp_path)], check=True)
    generated = tmp_path / "orbitkv" / "_proto"
    for name in ("engine_pb2.py", "engine_pb2_grpc.py"):
        assert (generated / name).is_file()
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run([str(Path(__file__).resolve().parents[1] / "generate-stubs.sh"), str(again)], check=True)
    for name in ("engine_pb2.py", "engine_pb2_grpc.py"):
        assert (generated / name).read_bytes() == (again / "orbitkv" / "_proto" / name).read_bytes()


# The same vectors as Java's java.util.zip.CRC32C (codecs' Crc32c): the RFC 3720 check value and two more.
CRC_VECTORS = [
    (b"123456789", 0xE3069283),
    (b"", 0x00000000),
    (bytes(32), 0x8A9136AA),  # RFC 3720 B.4: 32 bytes of zeros
    (b"\xff" * 32, 0x62A8AB43),  # RFC 3720 B.4: 32 bytes of 0xff
    (bytes(range(32)), 0x46DD794E),  # RFC 3720 B.4: incrementing bytes
]


@pytest.mark.parametrize("name", sorted(crc.IMPLEMENTATIONS) + ["reference"])
def test_every_crc32c_implementation_matches_java(name):
    implementation = crc.REFERENCE if name == "reference" else crc.IMPLEMENTATIONS[name]
    for data, expected in CRC_VECTORS:
        assert implementation(data) & 0xFFFFFFFF == expected, (name, data)
    assert implementation(b"6789", implementation(b"12345")) & 0xFFFFFFFF == 0xE3069283


def test_crc32c_of_a_memoryview_slice():
    data = bytearray(b"xx123456789yy")
    assert crc.crc32c(memoryview(data)[2:11]) == 0xE3069283
