package io.orbitkv.it;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.Parser;
import io.vertx.core.json.JsonObject;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * A test client of the event-bus bridge over a plain TCP socket, speaking its framing by hand (a 4-byte big-endian
 * length, then UTF-8 JSON): no Vert.x on this side, so the tests see exactly the bytes a non-Java client would.
 * Counts the bytes it sends and receives.
 */
final class RawBridge implements AutoCloseable {
    static final String SERVICE = "orbitkv.engine.v1.EngineService/";

    private final Socket socket;
    private final DataOutputStream out;
    private final DataInputStream in;
    private final String token;
    private long bytesSent;
    private long bytesReceived;
    private int nextReply;

    RawBridge(int port, String token) throws IOException {
        this(port, token, -1);
    }

    /** {@code receiveBufferBytes} > 0 shrinks the socket's receive buffer (for back-pressure tests). */
    RawBridge(int port, String token, int receiveBufferBytes) throws IOException {
        socket = new Socket();
        if (receiveBufferBytes > 0) {
            socket.setReceiveBufferSize(receiveBufferBytes);
        }
        socket.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        socket.setSoTimeout(20_000);
        out = new DataOutputStream(socket.getOutputStream());
        in = new DataInputStream(socket.getInputStream());
        this.token = token;
    }

    /** A send frame for an engine call: the token header, a fresh reply address, the base64 of the request. */
    JsonObject request(String method, Message request) {
        return request(method, Base64.getEncoder().encodeToString(request.toByteArray()));
    }

    JsonObject request(String method, Object body) {
        return new JsonObject().put("type", "send").put("address", SERVICE + method)
                .put("replyAddress", "reply-" + (++nextReply)).put("headers", new JsonObject().put("x-orbitkv-token", token))
                .put("body", body);
    }

    void send(JsonObject frame) throws IOException {
        sendRaw(frame.encode().getBytes(StandardCharsets.UTF_8));
    }

    /** One frame of exactly these bytes (any content). */
    void sendRaw(byte[] json) throws IOException {
        out.writeInt(json.length);
        out.write(json);
        out.flush();
        bytesSent += 4 + json.length;
    }

    /** Writes bytes as they are (a length prefix of the caller's choosing, a partial frame...). */
    void sendBytes(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
        bytesSent += bytes.length;
    }

    JsonObject receive() throws IOException {
        int length = in.readInt();
        byte[] json = new byte[length];
        in.readFully(json);
        bytesReceived += 4 + length;
        return new JsonObject(new String(json, StandardCharsets.UTF_8));
    }

    /** Sends one request and returns its answer (a "message" or an "err" frame addressed to its reply address). */
    JsonObject call(JsonObject frame) throws IOException {
        send(frame);
        JsonObject answer = receive();
        if (!frame.getString("replyAddress").equals(answer.getString("address"))) {
            throw new AssertionError("answer " + answer + " is not for " + frame.getString("replyAddress"));
        }
        return answer;
    }

    /** Calls an engine method and decodes its reply; an "err" answer fails with the frame in the message. */
    <R extends Message> R call(String method, Message request, Parser<R> replies) throws IOException {
        JsonObject answer = call(request(method, request));
        if (!"message".equals(answer.getString("type"))) {
            throw new AssertionError(method + " refused: " + answer);
        }
        try {
            return replies.parseFrom(Base64.getDecoder().decode(answer.getString("body")));
        } catch (InvalidProtocolBufferException e) {
            throw new AssertionError("undecodable " + method + " reply: " + answer, e);
        }
    }

    /** Whether the Manager closed this connection (end of stream within the read timeout). */
    boolean closedByPeer() throws IOException {
        try {
            return in.read() < 0;
        } catch (EOFException | java.net.SocketException e) {
            return true;
        } catch (SocketTimeoutException e) {
            return false;
        }
    }

    long bytesSent() {
        return bytesSent;
    }

    long bytesReceived() {
        return bytesReceived;
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
