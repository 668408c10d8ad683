//! `--uds PATH`: HTTP on a Unix domain socket. A socket file left by a process that is
//! gone (nothing accepts on it) is replaced; one a live server listens on is an error,
//! as is a path that is not a socket. The file is removed when the listener goes.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// The socket file this process bound; removed on drop unless something else has
/// replaced it since.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// (device, inode) of the socket file as bound.
    id: (u64, u64),
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == self.id)
            .unwrap_or(false);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!("cannot remove the socket file {}: {e}", self.path.display());
            }
        }
    }
}

/// Binds `path` (see the module doc for an existing file). The listen backlog is the
/// system's (`somaxconn`).
pub fn bind(path: &Path) -> anyhow::Result<(UnixListener, SocketFile)> {
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            anyhow::bail!("--uds {shown}: the path exists and is not a socket; remove it or choose another path")
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => anyhow::bail!(
                "--uds {shown}: another server is listening on this socket; stop it or choose another path"
            ),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                tracing::info!("replacing the stale socket file {shown}");
                std::fs::remove_file(path)
                    .map_err(|e| anyhow::anyhow!("--uds {shown}: cannot remove the stale socket file: {e}"))?;
            }
            Err(e) => anyhow::bail!("--uds {shown}: cannot check the existing socket file: {e}"),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("--uds {shown}: {e}"),
    }
    let listener =
        UnixListener::bind(path).map_err(|e| anyhow::anyhow!("cannot bind --uds {shown}: {e}"))?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| {
        anyhow::anyhow!("--uds {shown}: the socket file vanished after binding: {e}")
    })?;
    Ok((
        listener,
        SocketFile {
            path: path.to_path_buf(),
            id: (meta.dev(), meta.ino()),
        },
    ))
}
