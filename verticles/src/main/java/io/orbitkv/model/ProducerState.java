package io.orbitkv.model;

/** Where a named producer stands for a consumer's pages (see {@link ProducerRef}). */
public enum ProducerState {
    /** The session is live and has not sealed every page under the request yet (or its Manager did not answer). */
    WAITING,
    /** Every page was sealed by the session under the request. */
    SEALED,
    /** The session ended (unregistered, lapsed, resumed) or never existed there: it will never seal them. */
    ENDED
}
