//! A bound on an HTTP answer's body: at most `max` bytes, finished within `within` of its headers.
//! The Kubernetes client (kube) and the EKS client (the AWS SDK) collect bodies whole before
//! decoding them and have no size limit, and kube's read timeout is per read: without this a
//! hostile or broken server could fill the provider's memory with an endless body or hold it
//! forever with one that trickles. Each client wraps its response bodies in a `BoundedBody`.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// Why an answer was cut off. The texts are matched by [`is_bounded_error`].
#[derive(Debug)]
struct BodyBound(String);

impl std::fmt::Display for BodyBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BodyBound {}

const TOO_LARGE: &str = "the answer is larger than";
const TOO_SLOW: &str = "the answer did not finish within";

/// Whether an error text comes from a [`BoundedBody`].
pub(crate) fn is_bounded_error(text: &str) -> bool {
    text.contains(TOO_LARGE) || text.contains(TOO_SLOW)
}

pub(crate) struct BoundedBody<B> {
    inner: B,
    read: usize,
    max: usize,
    within: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    failed: bool,
}

impl<B> BoundedBody<B> {
    pub(crate) fn new(inner: B, max: usize, within: Duration) -> Self {
        BoundedBody {
            inner,
            read: 0,
            max,
            within,
            deadline: Box::pin(tokio::time::sleep(within)),
            failed: false,
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<B> Body for BoundedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let fail = |this: &mut Self, msg: String| {
            this.failed = true;
            Poll::Ready(Some(Err(Box::new(BodyBound(msg)) as BoxError)))
        };
        let max = this.max;
        if this.inner.size_hint().lower() > max as u64 {
            return fail(this, format!("{TOO_LARGE} {max} bytes"));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return fail(
                this,
                format!(
                    "{TOO_SLOW} {}s (it arrives too slowly or never ends)",
                    this.within.as_secs()
                ),
            );
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.read += d.len();
                    if this.read > max {
                        return fail(this, format!("{TOO_LARGE} {max} bytes"));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
