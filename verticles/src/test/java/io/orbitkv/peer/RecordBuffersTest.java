package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** A TLS connection's record buffers: reused after release, the rest served by the channel's own allocator. */
class RecordBuffersTest {
    final AtomicLong created = new AtomicLong();
    final AtomicLong reused = new AtomicLong();

    private ByteBufAllocator installed(EmbeddedChannel channel) {
        RecordBuffers.install(channel, created, reused);
        assertThat(channel.alloc()).isInstanceOf(RecordBuffers.class);
        return channel.alloc();
    }

    @Test
    void aReleasedRecordBufferServesTheNextRecordAndKeepsItsBytesWhileLent() {
        EmbeddedChannel channel = new EmbeddedChannel();
        ByteBufAllocator alloc = installed(channel);
        ByteBuf a = alloc.directBuffer(16_700);
        ByteBuf b = alloc.directBuffer(16_700);
        assertThat(created).hasValue(2);
        assertThat(a.capacity()).isGreaterThanOrEqualTo(16_700);
        assertThat(a.readableBytes()).isZero();
        a.writeLong(0x0123_4567_89AB_CDEFL);
        b.writeLong(42);
        assertThat(a.getLong(0)).as("two lent buffers never share memory").isEqualTo(0x0123_4567_89AB_CDEFL);
        assertThat(a.release()).isTrue();
        ByteBuf c = alloc.directBuffer(1024);
        assertThat(reused).as("the released buffer served the next request").hasValue(1);
        assertThat(created).hasValue(2);
        assertThat(c.readableBytes()).isZero();
        b.release();
        c.release();
        channel.close();
    }

    @Test
    void requestsItDoesNotServeGoToTheChannelsAllocator() {
        EmbeddedChannel channel = new EmbeddedChannel();
        ByteBufAllocator alloc = installed(channel);
        ByteBuf large = alloc.directBuffer(RecordBuffers.BUFFER_BYTES + 1);
        ByteBuf heap = alloc.heapBuffer(128);
        ByteBuf bounded = alloc.directBuffer(64, 1024); // a maximum below the buffer size
        assertThat(heap.isDirect()).isFalse();
        assertThat(large.capacity()).isGreaterThan(RecordBuffers.BUFFER_BYTES);
        assertThat(created.get() + reused.get()).isZero();
        large.release();
        heap.release();
        bounded.release();
        channel.close();
    }

    @Test
    void aBufferGrownPastItsMemoryKeepsItsBytesAndGivesTheMemoryBack() {
        EmbeddedChannel channel = new EmbeddedChannel();
        ByteBufAllocator alloc = installed(channel);
        ByteBuf grown = alloc.directBuffer(100);
        for (int i = 0; i < RecordBuffers.BUFFER_BYTES / 4 + 10; i++) {
            grown.writeInt(i);
        }
        assertThat(grown.capacity()).isGreaterThan(RecordBuffers.BUFFER_BYTES);
        for (int i = 0; i < RecordBuffers.BUFFER_BYTES / 4 + 10; i++) {
            assertThat(grown.getInt(4 * i)).isEqualTo(i);
        }
        ByteBuf next = alloc.directBuffer(100);
        assertThat(reused).as("the memory left behind serves the next record").hasValue(1);
        grown.release();
        next.release();
        channel.close();
    }

    @Test
    void onlyTheDecryptersOneArgumentRequestWhileDecryptingGetsATargetAndWithoutOneAtMostARecordBuffer() {
        EmbeddedChannel channel = new EmbeddedChannel();
        RecordBuffers alloc = (RecordBuffers) installed(channel);
        ByteBuf target = io.netty.buffer.Unpooled.directBuffer(64);
        alloc.targets = capacity -> target;
        assertThat(alloc.directBuffer(100)).as("not decrypting").isNotSameAs(target).matches(ByteBuf::release);
        alloc.decrypting = true;
        assertThat(alloc.directBuffer(100)).isSameAs(target);
        for (ByteBuf other : new ByteBuf[] {alloc.buffer(100), alloc.ioBuffer(100), alloc.ioBuffer(), alloc.buffer(),
                alloc.directBuffer(100, 1 << 20)}) {
            assertThat(other).as("read and cumulation buffers never get a target").isNotSameAs(target);
            other.release();
        }
        alloc.targets = capacity -> null;
        ByteBuf spill = alloc.directBuffer(1 << 20);
        assertThat(spill.capacity()).as("without a target: one record buffer, not the whole request")
                .isEqualTo(RecordBuffers.BUFFER_BYTES);
        spill.release();
        target.release();
        channel.close();
    }

    @Test
    void afterTheChannelClosedNothingIsKept() {
        EmbeddedChannel channel = new EmbeddedChannel();
        ByteBufAllocator alloc = installed(channel);
        ByteBuf held = alloc.directBuffer(100);
        alloc.directBuffer(100).release(); // kept for reuse
        channel.close();
        held.release(); // after the close: freed, not kept
        ByteBuf after = alloc.directBuffer(100);
        assertThat(reused).as("nothing was kept across the close").hasValue(0);
        assertThat(created).hasValue(3);
        after.release();
    }
}
