//! One benchmark connection: a TCP stream, a write buffer and a RESP reader.
//!
//! Commands are appended to the write buffer and sent with [`Conn::flush`];
//! replies are read one at a time with [`Conn::read_reply`], so pipelining
//! is "queue P commands, flush once, read P replies".  Every network read
//! and write is bounded by a timeout.

use std::fmt;
use std::io;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use disque::protocol::resp::reply::{decode, encode_command, DecodeError, Reply};

/// Anything that ends a connection's usefulness.
#[derive(Debug)]
pub enum ClientError {
    /// Socket error (connect, read or write).
    Io(io::Error),
    /// No data arrived (or could be sent) within the timeout.
    Timeout(Duration),
    /// The server closed the connection.
    Closed,
    /// The server sent something that is not RESP.
    Protocol(DecodeError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "I/O error: {e}"),
            ClientError::Timeout(d) => write!(f, "timed out after {} ms", d.as_millis()),
            ClientError::Closed => write!(f, "connection closed by server"),
            ClientError::Protocol(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

impl From<DecodeError> for ClientError {
    fn from(e: DecodeError) -> Self {
        ClientError::Protocol(e)
    }
}

/// A connected benchmark client.
pub struct Conn {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    timeout: Duration,
    addr: String,
}

impl Conn {
    /// Connects to `addr` ("host:port") within `timeout` and disables Nagle.
    pub async fn connect(addr: &str, timeout_dur: Duration) -> Result<Conn, ClientError> {
        let stream = timeout(timeout_dur, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout(timeout_dur))??;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: Vec::with_capacity(16 * 1024),
            timeout: timeout_dur,
            addr: addr.to_string(),
        })
    }

    /// The address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Queues one command built from `args`.
    pub fn queue(&mut self, args: &[&[u8]]) {
        encode_command(&mut self.wbuf, args);
    }

    /// Queues bytes that already hold one or more encoded commands.
    pub fn queue_raw(&mut self, encoded: &[u8]) {
        self.wbuf.extend_from_slice(encoded);
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        timeout(self.timeout, self.stream.write_all(&self.wbuf))
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))??;
        self.wbuf.clear();
        Ok(())
    }

    /// Reads the next reply, waiting at most the configured timeout per read.
    pub async fn read_reply(&mut self) -> Result<Reply, ClientError> {
        self.read_reply_within(self.timeout).await
    }

    /// Reads the next reply, waiting at most `per_read` for each socket read
    /// (used for blocking commands whose server-side timeout is longer).
    pub async fn read_reply_within(&mut self, per_read: Duration) -> Result<Reply, ClientError> {
        loop {
            if let Some((reply, used)) = decode(&self.rbuf)? {
                self.rbuf.advance(used);
                return Ok(reply);
            }
            self.rbuf.reserve(16 * 1024);
            let n = timeout(per_read, self.stream.read_buf(&mut self.rbuf))
                .await
                .map_err(|_| ClientError::Timeout(per_read))??;
            if n == 0 {
                return Err(ClientError::Closed);
            }
        }
    }

    /// The configured per-read timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A fake server that answers with pipelined replies split in small,
    /// delayed chunks, to exercise partial reads through the socket path.
    #[tokio::test]
    async fn pipelined_replies_over_a_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.expect("accept");
            let mut buf = vec![0u8; 1024];
            let mut got = Vec::new();
            while got.windows(4).filter(|w| *w == b"PING").count() < 3 {
                let n = sock.read(&mut buf).await.expect("read");
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            let reply: &[u8] = b"+PONG\r\n$5\r\nhello\r\n*2\r\n:1\r\n$-1\r\n";
            for chunk in reply.chunks(4) {
                sock.write_all(chunk).await.expect("write");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        let mut c = Conn::connect(&addr, Duration::from_secs(5))
            .await
            .expect("connect");
        for _ in 0..3 {
            c.queue(&[b"PING"]);
        }
        c.flush().await.expect("flush");
        assert_eq!(
            c.read_reply().await.expect("r1"),
            Reply::Status("PONG".into())
        );
        assert_eq!(
            c.read_reply().await.expect("r2"),
            Reply::Bulk(b"hello".to_vec())
        );
        assert_eq!(
            c.read_reply().await.expect("r3"),
            Reply::Array(vec![Reply::Int(1), Reply::NilBulk])
        );
        server.await.expect("server");
        assert!(matches!(c.read_reply().await, Err(ClientError::Closed)));
    }

    #[tokio::test]
    async fn read_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let _server = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.expect("accept");
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(sock);
        });
        let mut c = Conn::connect(&addr, Duration::from_millis(100))
            .await
            .expect("connect");
        assert!(matches!(c.read_reply().await, Err(ClientError::Timeout(_))));
    }
}
