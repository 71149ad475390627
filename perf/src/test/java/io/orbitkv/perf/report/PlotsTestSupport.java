package io.orbitkv.perf.report;

import javax.imageio.ImageIO;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/** PNG checks shared by the plot tests of both packages. */
public final class PlotsTestSupport {

    private PlotsTestSupport() {
    }

    private static final byte[] PNG_SIGNATURE = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

    /** Reads the file back as a PNG of the given size with a real drawing on it (many distinct colours). */
    public static void assertDrawnPng(Path png, int width, int height) throws IOException {
        byte[] bytes = Files.readAllBytes(png);
        assertThat(bytes).startsWith(PNG_SIGNATURE);
        BufferedImage image = ImageIO.read(png.toFile());
        assertThat(image).as("ImageIO could not decode %s", png).isNotNull();
        assertThat(image.getWidth()).isEqualTo(width);
        assertThat(image.getHeight()).isEqualTo(height);
        Set<Integer> colours = new HashSet<>();
        for (int y = 0; y < height; y += 3) {
            for (int x = 0; x < width; x += 3) {
                colours.add(image.getRGB(x, y));
            }
        }
        // Text anti-aliasing and several series colours give dozens of colours; a blank or failed render gives 1-2.
        assertThat(colours.size()).isGreaterThan(8);
    }
}
