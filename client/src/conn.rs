//! One connection to one node: TCP or TLS, request/reply with deadlines.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::error::{Error, Result};
use crate::resp::{Cmd, Decoder, Value};

#[cfg(feature = "tls")]
pub(crate) use crate::tls::Tls;

/// Stand-in so the connection code has one shape with or without TLS.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum Tls {}

enum Stream {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The host part of `host:port` or `[v6]:port`: the name TLS verifies.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

pub(crate) struct Connection {
    stream: Stream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    decoder: Decoder,
    pub(crate) addr: String,
    /// Set while a request is written but its reply not fully read: a
    /// command future dropped half-way (a `select!`, a timeout) leaves the
    /// connection out of step, so it must not be used again.
    in_flight: bool,
}

impl Connection {
    /// TCP connect (and TLS handshake) within `timeout`.
    pub(crate) async fn open(addr: &str, tls: Option<&Tls>, timeout: Duration) -> Result<Self> {
        let attempt = async {
            let tcp = TcpStream::connect(addr).await.map_err(|source| Error::Io {
                addr: addr.to_string(),
                source,
            })?;
            // Requests are small and latency-bound.
            let _ = tcp.set_nodelay(true);
            let stream = match tls {
                None => Stream::Tcp(tcp),
                #[cfg(feature = "tls")]
                Some(tls) => {
                    let name = tls.name_for(host_of(addr))?;
                    let s = tls
                        .connector
                        .connect(name, tcp)
                        .await
                        .map_err(|source| Error::Io {
                            addr: addr.to_string(),
                            source,
                        })?;
                    Stream::Tls(Box::new(s))
                }
                #[cfg(not(feature = "tls"))]
                Some(never) => match *never {},
            };
            Ok(stream)
        };
        let stream =
            tokio::time::timeout(timeout, attempt)
                .await
                .map_err(|_| Error::Timeout {
                    what: "connect".into(),
                    addr: addr.to_string(),
                    after: timeout,
                })??;
        Ok(Connection {
            stream,
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: BytesMut::with_capacity(1024),
            decoder: Decoder::default(),
            addr: addr.to_string(),
            in_flight: false,
        })
    }

    /// Whether an earlier request was abandoned half-way.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.in_flight
    }

    /// Send `cmd` and read its reply; `None` waits without a deadline.
    /// An error reply is returned as `Ok(Value::Error)`.
    pub(crate) async fn request(&mut self, cmd: &Cmd, timeout: Option<Duration>) -> Result<Value> {
        self.in_flight = true;
        let v = match timeout {
            None => self.exchange(cmd).await?,
            Some(t) => tokio::time::timeout(t, self.exchange(cmd))
                .await
                .map_err(|_| Error::Timeout {
                    what: cmd.name().to_string(),
                    addr: self.addr.clone(),
                    after: t,
                })??,
        };
        self.in_flight = false;
        Ok(v)
    }

    async fn exchange(&mut self, cmd: &Cmd) -> Result<Value> {
        let io_err = |addr: &str, source| Error::Io {
            addr: addr.to_string(),
            source,
        };
        self.wbuf.clear();
        cmd.encode_header(&mut self.wbuf);
        if cmd.args().len() <= 16 * 1024 {
            self.wbuf.extend_from_slice(cmd.args());
            self.stream.write_all(&self.wbuf).await
        } else {
            // A large job body is written from the command, not copied again.
            match self.stream.write_all(&self.wbuf).await {
                Ok(()) => self.stream.write_all(cmd.args()).await,
                Err(e) => Err(e),
            }
        }
        .map_err(|e| io_err(&self.addr, e))?;
        self.stream
            .flush()
            .await
            .map_err(|e| io_err(&self.addr, e))?;
        loop {
            match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => {}
                Err(e) => {
                    return Err(Error::Protocol {
                        addr: self.addr.clone(),
                        message: e.0,
                    });
                }
            }
            if self.rbuf.capacity() - self.rbuf.len() < 4096 {
                self.rbuf.reserve(16 * 1024);
            }
            let n = self
                .stream
                .read_buf(&mut self.rbuf)
                .await
                .map_err(|e| io_err(&self.addr, e))?;
            if n == 0 {
                return Err(Error::ConnectionClosed {
                    addr: self.addr.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn host_part() {
        assert_eq!(host_of("127.0.0.1:7711"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7711"), "::1");
        assert_eq!(host_of("disque.local:7711"), "disque.local");
    }
}
