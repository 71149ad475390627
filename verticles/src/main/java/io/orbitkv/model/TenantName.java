package io.orbitkv.model;

import java.util.regex.Pattern;

/** The tenant an engine registers under (RegisterRequest.tenant), as the engine and admission roles both check it. */
public final class TenantName {
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]{0,64}");

    private TenantName() {}

    /** Whether a tenant name is acceptable: 0..64 of [A-Za-z0-9._-] (empty is the default tenant). */
    public static boolean valid(String tenant) {
        return NAME.matcher(tenant).matches();
    }
}
