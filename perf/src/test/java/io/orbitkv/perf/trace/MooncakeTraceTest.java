package io.orbitkv.perf.trace;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.io.StringReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.io.TempDir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class MooncakeTraceTest {

    private static List<TraceRequest> parse(String text) {
        try (Stream<TraceRequest> requests = MooncakeTrace.of(new StringReader(text), "test.jsonl").stream()) {
            return requests.toList();
        }
    }

    @Test
    void parsesEveryFieldOfEachLineAndSkipsBlankLines() {
        List<TraceRequest> requests = parse("""
                {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}

                {"hash_ids": [], "output_length": 7, "input_length": 0, "timestamp": 1234, "extra": {"x": [1]}}
                {"timestamp": 9007199254740993, "input_length": 513, "output_length": 0, "hash_ids": [4294967296, 3]}
                """);

        assertThat(requests).containsExactly(
                new TraceRequest(0, 6758, 500, new long[] {0, 1, 2}),
                new TraceRequest(1234, 0, 7, new long[] {}),
                new TraceRequest(9007199254740993L, 513, 0, new long[] {4294967296L, 3}));
    }

    @Test
    void readsLongArraysBeyondTheInitialBuffer() {
        StringBuilder ids = new StringBuilder();
        for (int i = 0; i < 1000; i++) {
            ids.append(i == 0 ? "" : ",").append(i * 7);
        }
        TraceRequest request = parse("{\"timestamp\":1,\"input_length\":1,\"output_length\":1,\"hash_ids\":[" + ids + "]}")
                .getFirst();
        assertThat(request.hashIds()).hasSize(1000);
        assertThat(request.hashIds()[999]).isEqualTo(999 * 7);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            not json                  | {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1,]}     | invalid JSON at column
            truncated                 | {"timestamp": 0, "input_length": 1                                           | invalid JSON
            array instead of object   | [1, 2]                                                                        | expected a JSON object
            missing hash_ids          | {"timestamp": 0, "input_length": 1, "output_length": 1}                       | missing required field "hash_ids"
            missing timestamp         | {"input_length": 1, "output_length": 1, "hash_ids": []}                       | missing required field "timestamp"
            string length             | {"timestamp": 0, "input_length": "12", "output_length": 1, "hash_ids": []}    | "input_length" must be a non-negative integer, got string "12"
            fractional timestamp      | {"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": []}     | "timestamp" must be a non-negative integer, got 1.5
            negative output           | {"timestamp": 0, "input_length": 1, "output_length": -1, "hash_ids": []}      | "output_length" must be in [0, 2147483647], got -1
            int overflow              | {"timestamp": 0, "input_length": 2147483648, "output_length": 1, "hash_ids": []} | "input_length" must be in [0, 2147483647], got 2147483648
            huge id                   | {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [99999999999999999999]} | "hash_ids[0]" is out of range
            id not a number           | {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, null]} | "hash_ids[1]" must be a non-negative integer, got null
            ids not an array          | {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 5}        | "hash_ids" must be an array of integers, got 5
            duplicate field           | {"timestamp": 0, "timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": []} | Duplicate field 'timestamp'
            two objects on a line     | {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []} {}    | unexpected content after the JSON object
            """)
    void malformedLineIsReportedWithItsLineNumber(String caseName, String badLine, String expectedProblem) {
        String good = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}";
        String text = good + "\n\n" + badLine + "\n" + good + "\n";

        assertThatThrownBy(() -> parse(text))
                .isInstanceOfSatisfying(MalformedTraceException.class, e -> {
                    assertThat(e.lineNumber()).isEqualTo(3);
                    assertThat(e.source()).isEqualTo("test.jsonl");
                })
                .hasMessageStartingWith("test.jsonl:3: ")
                .hasMessageContaining(expectedProblem);
    }

    @Test
    void streamingFromAFileNamesTheFileInErrors(@TempDir Path dir) throws IOException {
        Path trace = dir.resolve("broken.jsonl");
        Files.writeString(trace, "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n{");

        assertThatThrownBy(() -> MooncakeTrace.readAll(trace))
                .isInstanceOf(MalformedTraceException.class)
                .hasMessageStartingWith(trace + ":2: ");
    }

    @Test
    void sharedSyntheticTraceParsesAndKeepsItsDocumentedShape() throws Exception {
        Path trace = SharedTraces.syntheticOrSkip();
        byte[] sha256 = MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(trace));
        assertThat(HexFormat.of().formatHex(sha256))
                .as("shared trace differs from the README's copy").isEqualTo(SharedTraces.SYNTHETIC_SHA256);

        List<TraceRequest> requests = MooncakeTrace.readAll(trace);

        assertThat(requests).hasSize(3_993);
        assertThat(requests).allSatisfy(request -> assertThat(request.blockCount())
                .isEqualTo((request.inputLength() + TraceRequest.BLOCK_TOKENS - 1) / TraceRequest.BLOCK_TOKENS));
        assertThat(requests.getLast().timestampMs()).isBetween(15 * 60_000L, 19 * 60_000L);
    }
}
