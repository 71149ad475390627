"""vLLM KV connector: ``kv_connector_module_path = "orbitkv.vllm"``, ``kv_connector = "OrbitKvConnector"``."""

from orbitkv.vllm.connector import (VLLM_UNAVAILABLE_CAUSE, LoadSpec, OrbitKvConnector, OrbitKvConnectorMetadata,
                                    SaveSpec)

__all__ = ["OrbitKvConnector", "OrbitKvConnectorMetadata", "LoadSpec", "SaveSpec", "VLLM_UNAVAILABLE_CAUSE"]
