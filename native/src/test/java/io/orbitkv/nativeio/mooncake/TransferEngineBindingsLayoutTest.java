package io.orbitkv.nativeio.mooncake;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The struct layouts the raw bindings pass to TE, against the sizes and offsets gcc gives for the pinned
 * {@code transfer_engine_c.h} on x86-64/aarch64 Linux (printed with {@code sizeof}/{@code offsetof}): a padding slip
 * here would hand TE a wrong address or length.
 */
class TransferEngineBindingsLayoutTest {

    @Test
    void structLayoutsMatchTheHeaderAsTheCCompilerLaysItOut() {
        assertThat(TransferEngineBindings.TRANSFER_REQUEST.byteSize()).isEqualTo(40);
        assertThat(TransferEngineBindings.REQUEST_OPCODE).isZero();
        assertThat(TransferEngineBindings.REQUEST_SOURCE).isEqualTo(8);
        assertThat(TransferEngineBindings.REQUEST_TARGET_ID).isEqualTo(16);
        assertThat(TransferEngineBindings.REQUEST_TARGET_OFFSET).isEqualTo(24);
        assertThat(TransferEngineBindings.REQUEST_LENGTH).isEqualTo(32);
        assertThat(TransferEngineBindings.TRANSFER_STATUS.byteSize()).isEqualTo(16);
        assertThat(TransferEngineBindings.STATUS_STATUS).isZero();
        assertThat(TransferEngineBindings.STATUS_TRANSFERRED).isEqualTo(8);
        assertThat(TransferEngineBindings.BUFFER_ENTRY.byteSize()).isEqualTo(16);
        assertThat(TransferEngineBindings.NOTIFY_MSG.byteSize()).isEqualTo(16);
        assertThat(TransferEngineBindings.NIC_LOAD_STAT.byteSize()).isEqualTo(80);
    }

    @Test
    void errorCodesMapFromBothConventions() {
        assertThat(TransferEngineError.of(-4)).isEqualTo(TransferEngineError.BATCH_BUSY);   // int-returning calls: -ERR_*
        assertThat(TransferEngineError.of(4)).isEqualTo(TransferEngineError.BATCH_BUSY);    // Status::Code
        assertThat(TransferEngineError.of(-303)).isEqualTo(TransferEngineError.NOT_IMPLEMENTED);
        assertThat(TransferEngineError.of(999)).isEqualTo(TransferEngineError.NOT_IMPLEMENTED);
        assertThat(TransferEngineError.of(12345)).isEqualTo(TransferEngineError.UNKNOWN);
        assertThat(TransferState.of(4)).isEqualTo(TransferState.COMPLETED);
        assertThat(TransferState.of(0).isTerminal()).isFalse();
        assertThat(TransferState.of(6).isTerminal()).isTrue();
    }
}
