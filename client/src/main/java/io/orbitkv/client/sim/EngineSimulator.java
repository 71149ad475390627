package io.orbitkv.client.sim;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.codecs.extent.Crc32c;
import io.orbitkv.protocol.engine.*;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * What a new user runs next to a Manager to see it work: registers an engine instance, publishes {@code pages}
 * pages of deterministic synthetic KV, queries several prefixes (whole, half, one block, and a longer chain whose
 * tail is unknown), copies every READY page out of the pool into its own memory, releases each lease, keeps the copy
 * only when the release says the lease stayed valid (the engine contract: {@link EngineSession#copyThenRelease}, with
 * the pages' CRC32C checked), verifies every kept byte, and unregisters. A discarded copy is counted and reported.
 */
public final class EngineSimulator {
    public record Options(Path dataDir, String tcp, int pages, long pageBytes, long seed) {}

    public record Result(int publishedPages, long publishedBytes, int queries, int readyQueries, long verifiedBytes,
                         long mismatches, long discardedLeases, List<String> problems) {
        public boolean ok() {
            return mismatches == 0 && problems.isEmpty();
        }

        public JsonObject toJson() {
            return new JsonObject().put("ok", ok()).put("published_pages", publishedPages)
                    .put("published_bytes", publishedBytes).put("queries", queries).put("ready_queries", readyQueries)
                    .put("verified_bytes", verifiedBytes).put("mismatched_pages", mismatches)
                    .put("discarded_leases", discardedLeases).put("problems", problems);
        }
    }

    private EngineSimulator() {}

    public static Result run(Options options, Consumer<String> progress) throws Exception {
        if (options.pages() <= 0 || options.pageBytes() <= 0) {
            throw new IllegalArgumentException("pages and page bytes must be positive");
        }
        String token = OrbitKvClient.readToken(options.dataDir().resolve("engine.token"));
        try (OrbitKvClient client = options.tcp() == null
                ? OrbitKvClient.connectUnix(options.dataDir().resolve("engine.sock"), token)
                : OrbitKvClient.connectTcp(options.tcp().substring(0, options.tcp().lastIndexOf(':')),
                        Integer.parseInt(options.tcp().substring(options.tcp().lastIndexOf(':') + 1)), token);
             Arena arena = Arena.ofConfined()) {
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("orbitkv-sim/synthetic-8b")
                    .setRepresentation(Representation.RAW).setLayout("sim:NHD")
                    .setGeometry("layers=32;kv_heads=8;head_dim=128;dtype=bf16").setPageSizeTokens(16)
                    .setTpSize(1).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION)
                            .setBytesPerPage(options.pageBytes()))
                    .build();
            List<String> problems = new ArrayList<>();
            try (EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await()) {
                progress.accept("registered instance " + session.instanceId() + "; pool " + session.registration().getPool().getPath());
                List<ByteString> hashes = SyntheticKv.chain(options.seed(), options.pages());
                int published = 0;
                long publishedBytes = 0;
                // Publish in batches that stay well inside the Manager's per-instance publish budget (half the pool by
                // default): at most 64 pages and a quarter of the pool at a time.
                long poolBytes = session.registration().getPool().getSizeBytes();
                int batchPages = (int) Math.max(1, Math.min(64, poolBytes / 4 / options.pageBytes()));
                for (int start = 0; start < hashes.size(); start += batchPages) {
                    List<ByteString> batch = hashes.subList(start, Math.min(hashes.size(), start + batchPages));
                    List<PageKey> keys = batch.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
                    AllocatePublishReply allocated = session.allocate(keys).await();
                    List<Integer> crcs = new ArrayList<>();
                    for (int i = 0; i < allocated.getSlotsCount(); i++) {
                        if (allocated.getSlots(i).getStatus() == SlotStatus.ALLOCATED) {
                            MemorySegment slot = session.slot(allocated.getSlots(i).getSlot());
                            SyntheticKv.fill(slot, options.seed(), 0, start + i);
                            crcs.add(Crc32c.of(slot));
                        }
                    }
                    if (!crcs.isEmpty()) {
                        SealPublishReply sealed = session.seal(allocated.getPublishId(), crcs).await();
                        published += sealed.getSealedPages();
                        publishedBytes += sealed.getSealedBytes();
                    }
                }
                progress.accept("published " + published + " pages (" + publishedBytes + " bytes; the rest were already present)");
                int[] prefixes = {options.pages(), Math.max(1, options.pages() / 2), 1};
                int queries = 0;
                int ready = 0;
                long verified = 0;
                long mismatches = 0;
                // The engine's own memory for one lease: every page of the longest prefix.
                MemorySegment engineMemory = arena.allocate(options.pageBytes() * options.pages(), 64);
                List<List<ByteString>> demands = new ArrayList<>();
                for (int p : prefixes) {
                    demands.add(hashes.subList(0, p));
                }
                List<ByteString> longer = new ArrayList<>(hashes);
                longer.addAll(SyntheticKv.chain(options.seed() ^ 0x5eed, 8));
                demands.add(longer);
                for (List<ByteString> demand : demands) {
                    queries++;
                    QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(demand).build())).await();
                    int expected = Math.min(demand.size(), options.pages());
                    if (reply.getStatus() != QueryStatus.READY) {
                        problems.add("query of " + demand.size() + " blocks answered " + reply.getStatus());
                        continue;
                    }
                    ready++;
                    if (reply.getReadyBlocks() > expected) {
                        problems.add("query of " + demand.size() + " blocks was READY for " + reply.getReadyBlocks()
                                + ", only " + expected + " were published");
                    } else if (reply.getReadyBlocks() < expected) {
                        // Legal: the Manager leases at most its query byte budget at once (75% of the pool by default).
                        progress.accept("query of " + demand.size() + " blocks: READY for the first "
                                + reply.getReadyBlocks() + " (the pool's query budget holds no more at once)");
                    }
                    List<LeasedPage> copied = new ArrayList<>();
                    EngineSession.LeaseCopy copy = session.copyThenRelease(reply, (page, slot) -> {
                        MemorySegment into = engineMemory.asSlice(copied.size() * options.pageBytes(), slot.byteSize());
                        into.copyFrom(slot);
                        copied.add(page);
                        return into;
                    }).await();
                    if (!copy.keep()) {
                        problems.add("query of " + demand.size() + " blocks: copy discarded (" + copy.discardCause() + ")");
                        continue;
                    }
                    for (int i = 0; i < copied.size(); i++) {
                        LeasedPage page = copied.get(i);
                        MemorySegment kept = engineMemory.asSlice(i * options.pageBytes(), page.getSlot().getLength());
                        if (SyntheticKv.verify(kept, options.seed(), page.getGroupId(), page.getPosition()) >= 0) {
                            mismatches++;
                        } else {
                            verified += kept.byteSize();
                        }
                    }
                    progress.accept("query of " + demand.size() + " blocks: READY " + reply.getReadyBlocks()
                            + " blocks, copied out, lease released and still valid, every byte verified");
                }
                StatsReply stats = session.stats().await();
                if (stats.getSessionLeases() != 0) {
                    problems.add(stats.getSessionLeases() + " leases still held after release");
                }
                progress.accept(mismatches == 0 && problems.isEmpty() ? "OK: every byte verified" : "FAILED: " + problems);
                return new Result(published, publishedBytes, queries, ready, verified, mismatches,
                        session.discardedCopies(), problems);
            }
        }
    }
}
