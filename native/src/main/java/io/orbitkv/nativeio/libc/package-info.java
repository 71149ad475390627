/**
 * libc through FFM: {@link io.orbitkv.nativeio.libc.LibcBindings} holds the raw downcall handles (shaped like the C
 * prototypes, no logic); {@link io.orbitkv.nativeio.libc.Libc} is the façade that owns call-scoped arenas, captures
 * errno and throws {@link io.orbitkv.nativeio.libc.NativeIoException}; {@link
 * io.orbitkv.nativeio.libc.NativeFileDescriptor} owns one descriptor.
 */
package io.orbitkv.nativeio.libc;
