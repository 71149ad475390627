/**
 * io_uring file I/O for the SSD tier, on netty's generic {@code IoUringIoHandle} API (netty has no file API).
 *
 * <p>Typical use by the SSD role, which owns one {@link io.orbitkv.nativeio.uring.IoUringFileIo}:
 * <pre>{@code
 * IoUringFileIo io = IoUringFileIo.create(new IoUringFileIoOptions().maxInFlight(16).listener(costObserver));
 * UringFile shard = io.open(path, Libc.O_RDWR | Libc.O_CREAT | Libc.O_DIRECT, Libc.MODE_0600).get(...);
 * io.fallocate(shard, 0, 0, shardBytes);                          // setup only
 * io.write(shard, extentOffset, extentSegment, IoLane.WRITE)      // header block + payload, 4096-aligned
 *   .thenCompose(n -> io.datasync(shard, IoLane.WRITE));
 * io.read(shard, extentOffset, poolSlot, IoLane.RESTORE);         // lands directly in the pool slot
 * io.close();                                                     // role stop, off the loop thread
 * }</pre>
 * Futures complete on the io_uring loop thread: hop back to the role's Vert.x context before touching role state.
 * A buffer belongs to the I/O layer until its future completes, cancelled or not.
 */
package io.orbitkv.nativeio.uring;
