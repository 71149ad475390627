/**
 * The CUDA runtime through FFM: raw bindings ({@code CudaRuntimeBindings}) and the façade ({@link
 * io.orbitkv.nativeio.cuda.CudaRuntime}) that probes once, keeps the cause and owns every handle it hands out.
 */
package io.orbitkv.nativeio.cuda;
