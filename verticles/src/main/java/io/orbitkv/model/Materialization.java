package io.orbitkv.model;

/** A slot being filled from SSD: the DRAM image (WRITING) and the SSD generation to read. */
public record Materialization(ImageRef image, long ssdGeneration) {}
