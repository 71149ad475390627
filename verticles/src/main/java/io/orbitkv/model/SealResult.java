package io.orbitkv.model;

public record SealResult(int sealedPages, long sealedBytes) {}
