package io.orbitkv.nativeio.cufile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.Test;

/** The cuFile façade's unavailable path: here the library is absent, and that is the cause every call carries. */
class CuFileTest {

    @Test
    void anAbsentLibraryIsTheKeptCauseAndEveryCallRefusesWithIt() {
        assumeFalse(CuFile.isAvailable(), "cuFile is installed and working here");
        Throwable cause = CuFile.unavailabilityCause();
        assertThat(cause).isNotNull();
        if (CuFile.libraryName() == null) {
            assertThat(cause).isInstanceOf(UnsatisfiedLinkError.class).hasMessageContaining("libcufile.so.0");
        }
        assertThatThrownBy(() -> CuFile.register(0)).isInstanceOf(CuFileUnavailableException.class).hasCause(cause)
                .hasMessageContaining("cuFile unavailable");
        assertThat(CuFile.liveHandles()).isZero();
    }
}
