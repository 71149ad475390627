/**
 * Mooncake's Transfer Engine through FFM: raw bindings of {@code transfer_engine_c.h} ({@code TransferEngineBindings},
 * kept mechanical) and the façade ({@link io.orbitkv.nativeio.mooncake.MooncakeTransferEngine}) that probes once,
 * validates every argument before C++ sees it, and owns registrations, remote segments and batches.
 */
package io.orbitkv.nativeio.mooncake;
