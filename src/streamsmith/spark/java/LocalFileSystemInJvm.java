package io.streamsmith.fs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}, checksummed), except for two calls that Hadoop
 * makes by starting a child process when its native library is absent, as it is in Spark's
 * distribution: setting a new file's or folder's permissions ({@code chmod}) and asking
 * whether a path is a symbolic link ({@code readlink}, before every rename Spark's
 * checkpoints and Delta's commits make). Each is a fork of the driver JVM and a thread to
 * read its output, dozens per micro-batch (what they cost: {@code benchmarks/local_files.py});
 * here both are {@code java.nio} calls, with the same results.
 */
public class LocalFileSystemInJvm extends LocalFileSystem {
  public LocalFileSystemInJvm() {
    super(new Raw());
  }

  /** The unchecksummed file system under it (and under {@link LocalFsInJvm}). */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) { // java.nio cannot set it: Hadoop's own way
        super.setPermission(path, permission);
        return;
      }
      String symbols =
          permission.getUserAction().SYMBOL
              + permission.getGroupAction().SYMBOL
              + permission.getOtherAction().SYMBOL;
      Files.setPosixFilePermissions(
          pathToFile(path).toPath(), PosixFilePermissions.fromString(symbols));
    }

    @Override
    public FileStatus getFileLinkStatus(Path path) throws IOException {
      if (Files.isSymbolicLink(pathToFile(path).toPath())) {
        return super.getFileLinkStatus(path);
      }
      return getFileStatus(path); // what Hadoop answers for a path that is not a link
    }
  }
}
