package io.orbitkv.perf.trace;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.function.Consumer;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * Streaming reader of a Mooncake trace: JSON Lines, one request per line, e.g.
 * {@code {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}}.
 *
 * <p>Design note: the file is read a line at a time and each line gets its own small Jackson streaming parser. A
 * trace can be far larger than the heap a load generator wants to spend on it, so nothing but the current line is
 * held; and parsing per line lets every error name the exact line (and column) instead of a byte offset in a 10 MB
 * stream. Jackson's streaming API (the same jackson-core Vert.x's {@code JsonObject} sits on) avoids building a map of
 * boxed values per request.
 *
 * <p>Strictness: the four fields are required, must be non-negative integers (hash ids: an array of them), and may
 * appear once each; anything else on the line after the object is an error. Unknown fields are ignored so that traces
 * carrying extra annotations still load. Blank lines are skipped (a trailing newline is common).
 *
 * <p>Not thread-safe: one reader per consuming thread.
 */
public final class MooncakeTrace implements AutoCloseable {

    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private final BufferedReader reader;
    private final String sourceName;
    private long lineNumber;
    private boolean closed;

    private MooncakeTrace(Reader reader, String sourceName) {
        this.reader = reader instanceof BufferedReader buffered ? buffered : new BufferedReader(reader, 1 << 16);
        this.sourceName = sourceName;
    }

    /** Opens {@code trace} (UTF-8) for streaming; close the result. */
    public static MooncakeTrace open(Path trace) throws IOException {
        return new MooncakeTrace(Files.newBufferedReader(trace, StandardCharsets.UTF_8), trace.toString());
    }

    /** Reads a trace from {@code reader}; {@code sourceName} appears in error messages. Closing closes the reader. */
    public static MooncakeTrace of(Reader reader, String sourceName) {
        return new MooncakeTrace(reader, sourceName);
    }

    /** Reads the whole trace into memory (the shared 4K-request trace takes a few MB). */
    public static List<TraceRequest> readAll(Path trace) throws IOException {
        List<TraceRequest> requests = new ArrayList<>();
        forEach(trace, requests::add);
        return requests;
    }

    /** Streams every request of {@code trace} to {@code consumer} in file order, holding one line at a time. */
    public static void forEach(Path trace, Consumer<? super TraceRequest> consumer) throws IOException {
        try (MooncakeTrace requests = open(trace)) {
            for (TraceRequest request = requests.next(); request != null; request = requests.next()) {
                consumer.accept(request);
            }
        }
    }

    /**
     * The next request, or {@code null} at the end of the trace.
     *
     * @throws MalformedTraceException naming the line when it is not a well-formed request
     * @throws UncheckedIOException    when reading fails
     */
    public TraceRequest next() {
        try {
            String line;
            do {
                line = reader.readLine();
                if (line == null) {
                    return null;
                }
                lineNumber++;
            } while (line.isBlank());
            return parseLine(line);
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + sourceName + " after line " + lineNumber, e);
        }
    }

    /** The remaining requests as a sequential stream; closing the stream closes this reader. */
    public Stream<TraceRequest> stream() {
        Spliterator<TraceRequest> spliterator = new Spliterators.AbstractSpliterator<>(
                Long.MAX_VALUE, Spliterator.ORDERED | Spliterator.NONNULL) {
            @Override
            public boolean tryAdvance(Consumer<? super TraceRequest> action) {
                TraceRequest request = next();
                if (request == null) {
                    return false;
                }
                action.accept(request);
                return true;
            }
        };
        return StreamSupport.stream(spliterator, false).onClose(this::close);
    }

    /** 1-based number of the last line read (0 before the first). */
    public long lineNumber() {
        return lineNumber;
    }

    /** Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            reader.close();
        } catch (IOException e) {
            throw new UncheckedIOException("closing " + sourceName, e);
        }
    }

    private TraceRequest parseLine(String line) throws IOException {
        try (JsonParser parser = JSON.createParser(line)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                throw malformed("expected a JSON object", null);
            }
            long timestampMs = -1;
            long inputLength = -1;
            long outputLength = -1;
            long[] hashIds = null;
            for (JsonToken token = parser.nextToken(); token != JsonToken.END_OBJECT; token = parser.nextToken()) {
                if (token != JsonToken.FIELD_NAME) {
                    throw malformed("truncated object", null);
                }
                String field = parser.currentName();
                parser.nextToken();
                switch (field) {
                    case "timestamp" -> timestampMs = nonNegativeInteger(parser, field, Long.MAX_VALUE);
                    case "input_length" -> inputLength = nonNegativeInteger(parser, field, Integer.MAX_VALUE);
                    case "output_length" -> outputLength = nonNegativeInteger(parser, field, Integer.MAX_VALUE);
                    case "hash_ids" -> hashIds = hashIds(parser);
                    default -> parser.skipChildren();
                }
            }
            if (parser.nextToken() != null) {
                throw malformed("unexpected content after the JSON object", null);
            }
            requirePresent(timestampMs >= 0, "timestamp");
            requirePresent(inputLength >= 0, "input_length");
            requirePresent(outputLength >= 0, "output_length");
            requirePresent(hashIds != null, "hash_ids");
            return new TraceRequest(timestampMs, (int) inputLength, (int) outputLength, hashIds);
        } catch (JsonProcessingException e) {
            // Jackson's own message carries a source excerpt we do not want repeated; keep its core and the column.
            throw malformed("invalid JSON at column " + e.getLocation().getColumnNr() + ": " + e.getOriginalMessage(), e);
        }
    }

    private long[] hashIds(JsonParser parser) throws IOException {
        if (parser.currentToken() != JsonToken.START_ARRAY) {
            throw malformed("\"hash_ids\" must be an array of integers, got " + describe(parser), null);
        }
        long[] ids = new long[64];
        int count = 0;
        for (JsonToken token = parser.nextToken(); token != JsonToken.END_ARRAY; token = parser.nextToken()) {
            if (token == null) {
                throw malformed("truncated \"hash_ids\" array", null);
            }
            long id = nonNegativeInteger(parser, "hash_ids[" + count + "]", Long.MAX_VALUE);
            if (count == ids.length) {
                ids = Arrays.copyOf(ids, count * 2);
            }
            ids[count++] = id;
        }
        return Arrays.copyOf(ids, count);
    }

    private long nonNegativeInteger(JsonParser parser, String field, long max) throws IOException {
        if (parser.currentToken() != JsonToken.VALUE_NUMBER_INT) {
            throw malformed("\"" + field + "\" must be a non-negative integer, got " + describe(parser), null);
        }
        if (parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
            throw malformed("\"" + field + "\" is out of range: " + parser.getText(), null);
        }
        long value = parser.getLongValue();
        if (value < 0 || value > max) {
            throw malformed("\"" + field + "\" must be in [0, " + max + "], got " + value, null);
        }
        return value;
    }

    private void requirePresent(boolean present, String field) {
        if (!present) {
            throw malformed("missing required field \"" + field + "\"", null);
        }
    }

    private static String describe(JsonParser parser) throws IOException {
        JsonToken token = parser.currentToken();
        if (token == null) {
            return "end of input";
        }
        return switch (token) {
            case START_OBJECT -> "an object";
            case START_ARRAY -> "an array";
            case VALUE_STRING -> "string \"" + parser.getText() + "\"";
            default -> parser.getText();
        };
    }

    private MalformedTraceException malformed(String problem, Throwable cause) {
        return new MalformedTraceException(sourceName, lineNumber, problem, cause);
    }
}
