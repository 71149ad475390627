package io.orbitkv.nativeio.uring;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/** Test hook: records the order in which requests reach the kernel and lets a test await a given submission. */
final class RecordingListener implements FileIoListener {

    record Submission(IoLane lane, FileIoOperation operation, Path path, long fileOffset) {
    }

    record Completion(IoLane lane, FileIoOperation operation, Path path, long fileOffset, long transferredBytes,
                      int errno, long submitToCompleteNanos) {
    }

    final List<Submission> submissions = new CopyOnWriteArrayList<>();
    final List<Completion> completions = new CopyOnWriteArrayList<>();
    private final Map<Path, CompletableFuture<Void>> firstSubmission = new ConcurrentHashMap<>();

    @Override
    public void onSubmitted(IoLane lane, FileIoOperation operation, Path path, long fileOffset, long lengthBytes) {
        submissions.add(new Submission(lane, operation, path, fileOffset));
        submittedOn(path).complete(null);
    }

    @Override
    public void onCompleted(IoLane lane, FileIoOperation operation, Path path, long fileOffset,
                            long transferredBytes, int errno, long submitToCompleteNanos) {
        completions.add(new Completion(lane, operation, path, fileOffset, transferredBytes, errno,
                submitToCompleteNanos));
    }

    /** Completes when the first request on {@code path} has been submitted to the kernel. */
    CompletableFuture<Void> submittedOn(Path path) {
        return firstSubmission.computeIfAbsent(path, ignored -> new CompletableFuture<>());
    }

    List<Submission> submissionsOn(Path path) {
        return submissions.stream().filter(s -> s.path().equals(path)).toList();
    }
}
