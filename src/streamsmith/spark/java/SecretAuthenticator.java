package io.streamsmith.auth;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.security.MessageDigest;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * The password check of streamsmith's JDBC server (Spark's Thrift server, authentication
 * CUSTOM): a client gets in when its password is the secret streamsmith generated when the
 * server started. The secret is read from the file named by the system property
 * {@code streamsmith.sql.secretFile} (readable by the server's user only), so it appears
 * neither on a command line nor among the session's properties.
 */
public final class SecretAuthenticator implements PasswdAuthenticationProvider {
  static final String SECRET_FILE = "streamsmith.sql.secretFile";

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    String file = System.getProperty(SECRET_FILE);
    if (file == null || password == null) {
      throw new AuthenticationException("the streamsmith SQL server needs its secret as password");
    }
    byte[] expected;
    try {
      Path path = Path.of(file);
      if (Files.isSymbolicLink(path) || !Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS)) {
        throw new AuthenticationException("the streamsmith SQL server's secret file is gone");
      }
      expected = Files.readString(path, StandardCharsets.UTF_8).strip().getBytes(StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new AuthenticationException("the streamsmith SQL server cannot read its secret", e);
    }
    byte[] given = password.getBytes(StandardCharsets.UTF_8);
    if (expected.length == 0 || !MessageDigest.isEqual(expected, given)) {
      throw new AuthenticationException("wrong password for the streamsmith SQL server");
    }
  }
}
