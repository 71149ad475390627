package io.orbitkv.model;

public enum ImageState { WRITING, SEALED }
