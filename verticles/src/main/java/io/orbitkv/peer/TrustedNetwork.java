package io.orbitkv.peer;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;

/**
 * A network named in CIDR form ({@code 10.0.0.0/24}, {@code fd00::/64}, {@code 127.0.0.1/32}): what an operator
 * declares trusted before a transport that authenticates nobody may be used ({@code peer.mooncake-te.trusted-network}).
 * Only IP literals are accepted (no name lookup).
 */
record TrustedNetwork(String cidr, byte[] network, int prefixBits) {
    public TrustedNetwork {
        network = network.clone();
    }

    /** Parses {@code cidr}; {@link IllegalArgumentException} naming what is wrong. */
    public static TrustedNetwork parse(String cidr) {
        String text = cidr.strip();
        int slash = text.indexOf('/');
        if (slash <= 0 || slash == text.length() - 1) {
            throw new IllegalArgumentException("a trusted network is address/prefix (CIDR), got '" + cidr + "'");
        }
        byte[] address = literal(text.substring(0, slash));
        int bits;
        try {
            bits = Integer.parseInt(text.substring(slash + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("the prefix of '" + cidr + "' is not a number");
        }
        if (bits < 0 || bits > address.length * 8) {
            throw new IllegalArgumentException("the prefix of '" + cidr + "' is not in [0, " + address.length * 8 + "]");
        }
        byte[] masked = mask(address, bits);
        if (!Arrays.equals(masked, address)) {
            throw new IllegalArgumentException("'" + cidr + "' has host bits set below its prefix");
        }
        return new TrustedNetwork(text, masked, bits);
    }

    /** Whether the IP literal {@code host} lies inside this network (a name or another address family: false). */
    public boolean contains(String host) {
        byte[] address;
        try {
            address = literal(host);
        } catch (IllegalArgumentException e) {
            return false;
        }
        return address.length == network.length && Arrays.equals(mask(address, prefixBits), network);
    }

    private static byte[] literal(String host) {
        String h = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
        boolean ipv4 = h.chars().allMatch(c -> c == '.' || Character.isDigit(c)) && h.chars().filter(c -> c == '.').count() == 3;
        if (!ipv4 && !h.contains(":")) {
            throw new IllegalArgumentException("'" + host + "' is not an IP literal");
        }
        try {
            return InetAddress.getByName(h).getAddress(); // a literal: no lookup happens
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("'" + host + "' is not an IP literal");
        }
    }

    private static byte[] mask(byte[] address, int bits) {
        byte[] out = address.clone();
        for (int i = 0; i < out.length; i++) {
            int keep = Math.clamp(bits - i * 8L, 0, 8);
            out[i] &= (byte) (0xff << (8 - keep));
        }
        return out;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TrustedNetwork t && t.prefixBits == prefixBits && Arrays.equals(t.network, network);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(network) * 31 + prefixBits;
    }

    @Override
    public String toString() {
        return cidr;
    }
}
