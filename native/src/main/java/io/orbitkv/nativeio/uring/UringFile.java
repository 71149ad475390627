package io.orbitkv.nativeio.uring;

import io.netty.channel.IoEvent;
import io.netty.channel.IoRegistration;
import io.netty.channel.uring.IoUringIoEvent;
import io.netty.channel.uring.IoUringIoHandle;
import io.orbitkv.nativeio.libc.NativeFileDescriptor;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;

/**
 * A file opened by {@link IoUringFileIo} and registered on its io_uring loop.
 *
 * <p>Design note: the descriptor is owned by the {@link IoUringFileIo} that opened it and is closed only on its loop
 * thread, after every request on the file has completed ({@link IoUringFileIo#closeFile} or
 * {@link IoUringFileIo#close}); so a descriptor number is never reused by the kernel while a request could still name
 * it. Callers hold this object as an opaque handle and never see the raw descriptor.
 */
public final class UringFile {

    final IoUringFileIo owner;
    final NativeFileDescriptor descriptor;
    final Handle handle = new Handle();
    final CompletableFuture<Void> closeFuture = new CompletableFuture<>();

    // Loop-confined.
    IoRegistration registration;
    int outstandingRequests;
    boolean closing;

    UringFile(IoUringFileIo owner, NativeFileDescriptor descriptor) {
        this.owner = owner;
        this.descriptor = descriptor;
    }

    public Path path() {
        return descriptor.path();
    }

    /** Whether the file was opened with O_DIRECT (offsets, lengths and buffer addresses must then be aligned). */
    public boolean direct() {
        return descriptor.direct();
    }

    /** True once the descriptor has been closed. */
    public boolean isClosed() {
        return descriptor.isClosed();
    }

    int fd() {
        return descriptor.fd();
    }

    @Override
    public String toString() {
        return "UringFile[" + descriptor + "]";
    }

    /** The netty side of the file: completions for this file's requests arrive here, on the loop thread. */
    final class Handle implements IoUringIoHandle {

        @Override
        public void handle(IoRegistration registration, IoEvent ioEvent) {
            IoUringIoEvent event = (IoUringIoEvent) ioEvent;
            owner.onCompletion(UringFile.this, event.res(), event.data());
        }

        /** Called by netty when the loop shuts down with the registration still present; idempotent. */
        @Override
        public void close() {
            owner.closeDescriptorQuietly(UringFile.this);
        }
    }
}
