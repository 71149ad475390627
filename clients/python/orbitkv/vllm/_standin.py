"""Stand-ins for vLLM's connector base types, used only where vLLM is not installed (these machines, the tests).

Inside vLLM, :mod:`orbitkv.vllm.connector` subclasses the real ``KVConnectorBase_V1`` instead. These keep exactly the
names and the behaviour the connector relies on from vLLM's ``base.py`` (commit 003df2961dd8): the constructor
stores the configs and the role, ``bind_connector_metadata`` / ``clear_connector_metadata`` /
``_get_connector_metadata`` / ``has_connector_metadata`` hold the step's metadata, ``requires_kv_delivery``
defaults to the producer role, and ``SupportsHMA`` marks a connector for the hybrid memory allocator. Nothing else of vLLM is imitated.
"""

from __future__ import annotations

import enum


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata:
    pass


class KVConnectorBase_V1:  # noqa: N801 (vLLM's name)
    def __init__(self, vllm_config, role, kv_cache_config):
        self._connector_metadata = None
        self._vllm_config = vllm_config
        if vllm_config.kv_transfer_config is None:
            raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
        self._kv_transfer_config = vllm_config.kv_transfer_config
        self._kv_cache_config = kv_cache_config
        self._role = role

    @property
    def requires_kv_delivery(self) -> bool:
        return self._kv_transfer_config.is_kv_producer

    @property
    def role(self):
        return self._role

    def bind_connector_metadata(self, connector_metadata):
        self._connector_metadata = connector_metadata

    def clear_connector_metadata(self):
        self._connector_metadata = None

    def _get_connector_metadata(self):
        assert self._connector_metadata is not None
        return self._connector_metadata

    def has_connector_metadata(self):
        return self._connector_metadata is not None


class SupportsHMA:
    """vLLM's marker for connectors that take the hybrid memory allocator's several KV cache groups; the connector
    implements its one method, ``request_finished_all_groups``."""
