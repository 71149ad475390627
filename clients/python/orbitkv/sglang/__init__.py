"""SGLang HiCache storage backend, loaded as SGLang's ``dynamic`` backend:

    --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
      '{"backend_name": "orbitkv", "module_path": "orbitkv.sglang", "class_name": "OrbitKvHiCacheStorage",
        "interface_v1": 1, "orbitkv_data_dir": "/path/to/data"}'
"""

from orbitkv.sglang.storage import SGLANG_UNAVAILABLE_CAUSE, OrbitKvHiCacheStorage

__all__ = ["OrbitKvHiCacheStorage", "SGLANG_UNAVAILABLE_CAUSE"]
