package io.orbitkv.clusterkit;

import java.io.IOException;
import java.io.StringWriter;
import java.math.BigInteger;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * {@code orbitkv cluster certs}: a cluster CA and one key and certificate per Manager (BouncyCastle), as PEM files
 * that {@code cluster.tls.ca}, {@code cluster.tls.cert} and {@code cluster.tls.key} name.
 *
 * <p>Files in DIR: {@code ca.pem} (the CA certificate every Manager trusts), {@code ca.key} (kept only to add
 * Managers later: move it off the hosts), {@code manager-N.pem} and {@code manager-N.key} for N = 1..managers. Keys
 * are EC P-256 in PKCS#8, written mode 0600 (created that way: never readable by others, not even briefly); DIR is
 * created 0700. Manager certificates are for both TLS server and client authentication (the event bus requires
 * both sides to present one), carry the member id as their CN and a DNS name, and the given hosts as subject
 * alternative names.
 */
public final class ClusterCertificates {
    private static final String SIGNATURE = "SHA256withECDSA";

    private ClusterCertificates() {}

    /** What was written. */
    public record Written(Path ca, Path caKey, List<Path> certificates, List<Path> keys) {}

    public static Written create(Path dir, int managers, List<String> hosts, Duration validity)
            throws IOException, GeneralSecurityException {
        if (managers < 1 || managers > 1000) {
            throw new IllegalArgumentException("--managers must be 1..1000, got " + managers);
        }
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        SecureRandom random = new SecureRandom();
        Instant now = Instant.now();
        KeyPair caKeys = ecKeyPair(random);
        X500Name caName = new X500Name("CN=OrbitKV cluster CA");
        X509Certificate ca;
        try {
            X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(caName, serial(random),
                    Date.from(now.minus(Duration.ofMinutes(5))), Date.from(now.plus(validity)), caName, caKeys.getPublic());
            JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
            builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(0));
            builder.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
            builder.addExtension(Extension.subjectKeyIdentifier, false, ext.createSubjectKeyIdentifier(caKeys.getPublic()));
            ca = new JcaX509CertificateConverter().getCertificate(
                    builder.build(new JcaContentSignerBuilder(SIGNATURE).build(caKeys.getPrivate())));
        } catch (OperatorCreationException | IOException e) {
            throw new GeneralSecurityException("cannot sign the cluster CA: " + e.getMessage(), e);
        }
        Path caPem = dir.resolve("ca.pem");
        Path caKey = dir.resolve("ca.key");
        writePublic(caPem, pem(ca));
        writePrivate(caKey, pem(caKeys.getPrivate()));
        List<Path> certs = new ArrayList<>();
        List<Path> keys = new ArrayList<>();
        for (int i = 1; i <= managers; i++) {
            String id = "manager-" + i;
            KeyPair pair = ecKeyPair(random);
            X509Certificate cert = leaf(id, pair, ca, caKeys.getPrivate(), hosts, now, validity, random);
            Path certPath = dir.resolve(id + ".pem");
            Path keyPath = dir.resolve(id + ".key");
            writePublic(certPath, pem(cert));
            writePrivate(keyPath, pem(pair.getPrivate()));
            certs.add(certPath);
            keys.add(keyPath);
        }
        return new Written(caPem, caKey, certs, keys);
    }

    /** A Manager certificate (server + client authentication) signed by the CA. */
    static X509Certificate leaf(String memberId, KeyPair pair, X509Certificate ca, PrivateKey caKey, List<String> hosts,
                                Instant now, Duration validity, SecureRandom random) throws GeneralSecurityException {
        try {
            X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(ca, serial(random),
                    Date.from(now.minus(Duration.ofMinutes(5))), Date.from(now.plus(validity)),
                    new X500Name("CN=" + memberId + ",O=OrbitKV cluster"), pair.getPublic());
            JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
            builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
            builder.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature | KeyUsage.keyAgreement));
            builder.addExtension(Extension.extendedKeyUsage, false,
                    new ExtendedKeyUsage(new KeyPurposeId[] {KeyPurposeId.id_kp_serverAuth, KeyPurposeId.id_kp_clientAuth}));
            builder.addExtension(Extension.authorityKeyIdentifier, false, ext.createAuthorityKeyIdentifier(ca));
            List<GeneralName> names = new ArrayList<>();
            names.add(new GeneralName(GeneralName.dNSName, memberId));
            for (String host : hosts) {
                boolean ip = host.chars().allMatch(c -> Character.isDigit(c) || c == '.' || c == ':')
                        && InetAddress.ofLiteral(host) != null;
                names.add(new GeneralName(ip ? GeneralName.iPAddress : GeneralName.dNSName, host));
            }
            builder.addExtension(Extension.subjectAlternativeName, false,
                    new GeneralNames(names.toArray(GeneralName[]::new)));
            return new JcaX509CertificateConverter().getCertificate(
                    builder.build(new JcaContentSignerBuilder(SIGNATURE).build(caKey)));
        } catch (OperatorCreationException | IOException | IllegalArgumentException e) {
            throw new GeneralSecurityException("cannot sign the certificate of " + memberId + ": " + e.getMessage(), e);
        }
    }

    static KeyPair ecKeyPair(SecureRandom random) throws GeneralSecurityException {
        KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
        generator.initialize(new ECGenParameterSpec("secp256r1"), random);
        return generator.generateKeyPair();
    }

    private static BigInteger serial(SecureRandom random) {
        return new BigInteger(127, random).add(BigInteger.ONE);
    }

    static String pem(Object object) throws IOException {
        StringWriter out = new StringWriter();
        try (JcaPEMWriter writer = new JcaPEMWriter(out)) {
            if (object instanceof PrivateKey key) {
                writer.writeObject(new JcaPKCS8Generator(key, null));
            } else {
                writer.writeObject(object);
            }
        }
        return out.toString();
    }

    private static void writePublic(Path path, String pem) throws IOException {
        Files.writeString(path, pem, StandardCharsets.US_ASCII);
    }

    /** Created 0600 (or truncated, then re-chmodded) before a byte of the key is written. */
    private static void writePrivate(Path path, String pem) throws IOException {
        Files.deleteIfExists(path);
        Files.createFile(path, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(path, pem, StandardCharsets.US_ASCII, StandardOpenOption.TRUNCATE_EXISTING);
    }
}
