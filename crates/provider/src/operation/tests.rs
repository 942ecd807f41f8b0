//! Unit tests of the waits: backoff, sleeps and runs under the deadline and stop, poll_until,
//! retry and bounded.

use super::*;
use crate::cloud::CloudError;

use std::sync::Mutex;

#[test]
fn backoff_doubles_to_the_cap_and_honours_retry_after() {
    let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(400));
    let d: Vec<Duration> = (0..4).map(|_| b.next_delay(None)).collect();
    assert!(d[0] >= Duration::from_millis(100) && d[0] <= Duration::from_millis(120));
    assert!(d[1] >= Duration::from_millis(200) && d[1] <= Duration::from_millis(240));
    assert!(d[3] >= Duration::from_millis(400) && d[3] <= Duration::from_millis(480));
    assert_eq!(
        b.next_delay(Some(Duration::from_secs(3))),
        Duration::from_secs(3)
    );
    assert_eq!(
        b.next_delay(Some(Duration::from_secs(600))),
        MAX_RETRY_AFTER
    );
    assert_eq!(
        retry_after_seconds(Some(" 7 ")),
        Some(Duration::from_secs(7))
    );
    assert_eq!(
        retry_after_seconds(Some("Wed, 21 Oct 2015 07:28:00 GMT")),
        None
    );
}

#[test]
fn polls_grow_by_half_to_the_cap() {
    let mut b = Backoff::polling(Duration::from_millis(200), Duration::from_millis(500));
    let d: Vec<Duration> = (0..4).map(|_| b.next_delay(None)).collect();
    for (got, base) in d.iter().zip([200, 300, 450, 500]) {
        let base = Duration::from_millis(base);
        assert!(*got >= base && *got <= base.mul_f64(1.2), "{d:?}");
    }
}

#[test]
fn a_steady_pace_keeps_one_delay_without_jitter() {
    let mut b = Backoff::every(Duration::from_secs(2));
    let d: Vec<Duration> = (0..5).map(|_| b.next_delay(None)).collect();
    assert_eq!(d, vec![Duration::from_secs(2); 5]);
}

#[test]
fn a_floor_holds_under_retry_after_and_a_spread_stays_within_a_tenth() {
    let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1))
        .at_least(Duration::from_millis(20))
        .spread_retry_after();
    assert_eq!(
        b.next_delay(Some(Duration::ZERO)),
        Duration::from_millis(20)
    );
    let d = b.next_delay(Some(Duration::from_secs(2)));
    assert!(
        d >= Duration::from_secs(2) && d <= Duration::from_millis(2200),
        "{d:?}"
    );
    // The Retry-Afters moved the backoff on: the next delay of its own is the third.
    let d = b.next_delay(None);
    assert!(
        d >= Duration::from_millis(400) && d <= Duration::from_millis(480),
        "{d:?}"
    );
}

#[tokio::test]
async fn sleeps_end_at_the_deadline_or_a_stop() {
    let stop = StopSignal::default();
    let ctx = OpCtx::new(Duration::from_millis(50), stop.clone());
    assert!(matches!(
        ctx.sleep(Duration::from_secs(10), "x").await,
        Err(Interrupted::Timeout { .. })
    ));

    let ctx = OpCtx::new(Duration::from_secs(60), stop.clone());
    let waiter = tokio::spawn(async move { ctx.sleep(Duration::from_secs(60), "x").await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    stop.stop();
    assert!(matches!(waiter.await.unwrap(), Err(Interrupted::Stopped)));
}

#[tokio::test]
async fn run_ends_work_at_the_deadline_or_a_stop_and_starts_none_once_stopped() {
    let stop = StopSignal::default();
    let ctx = OpCtx::new(Duration::from_secs(5), stop.clone());
    assert_eq!(ctx.run("quick", async { 7 }).await.unwrap(), 7);

    let ctx = OpCtx::new(Duration::from_millis(50), stop.clone());
    match ctx.run("GET /slow", std::future::pending::<()>()).await {
        Err(Interrupted::Timeout { waiting_for, .. }) => assert_eq!(waiting_for, "GET /slow"),
        other => panic!("expected Timeout, got {other:?}"),
    }

    let ctx = OpCtx::new(Duration::from_secs(60), stop.clone());
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        stopper.stop();
    });
    assert!(matches!(
        ctx.run("x", std::future::pending::<()>()).await,
        Err(Interrupted::Stopped)
    ));
    assert!(matches!(
        ctx.run("x", async { 1 }).await,
        Err(Interrupted::Stopped)
    ));
}

#[tokio::test]
async fn bounded_says_which_limit_cut_the_work_short() {
    let stop = StopSignal::default();
    let limit = Duration::from_millis(30);
    assert_eq!(bounded(limit, &stop, async { 1 }).await, Ok(1));
    assert_eq!(
        bounded(limit, &stop, std::future::pending::<()>()).await,
        Err(Cut::Timeout)
    );
    stop.stop();
    assert_eq!(
        bounded(Duration::from_secs(60), &stop, std::future::pending::<()>()).await,
        Err(Cut::Stop)
    );
}

fn fast() -> Backoff {
    Backoff::polling(Duration::from_millis(1), Duration::from_millis(2))
}

#[tokio::test]
async fn poll_until_looks_until_done_and_names_the_wait_as_the_checks_put_it() {
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    let seen = Mutex::new(Vec::new());
    let seen_ref = &seen;
    let done = poll_until(
        &ctx,
        fast(),
        "pool p".to_string(),
        Start::Now,
        move |waiting_for| {
            let n = {
                let mut seen = seen_ref.lock().unwrap();
                seen.push(waiting_for.to_string());
                seen.len()
            };
            async move {
                Ok::<_, CloudError>(if n == 3 {
                    Check::Done(n)
                } else {
                    Check::Pending {
                        retry_after: None,
                        waiting_for: Some(format!("pool p (look {n})")),
                    }
                })
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(done, 3);
    assert_eq!(
        *seen.lock().unwrap(),
        ["pool p", "pool p (look 1)", "pool p (look 2)"]
    );

    // A wait that never ends times out under the name the last check gave it.
    let ctx = OpCtx::new(Duration::from_millis(60), StopSignal::default());
    let r: Result<(), _> = poll_until(&ctx, fast(), "pool q".into(), Start::Now, |_| async {
        Ok(Check::Pending {
            retry_after: None,
            waiting_for: Some("pool q (status CREATING)".into()),
        })
    })
    .await;
    match r {
        Err(CloudError::Timeout { waiting_for, .. }) => {
            assert_eq!(waiting_for, "pool q (status CREATING)")
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn poll_until_can_sleep_before_its_first_look() {
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    let t = Instant::now();
    poll_until(
        &ctx,
        fast(),
        "op".into(),
        Start::Sleep(Some(Duration::from_millis(50))),
        |_| async { Ok::<_, CloudError>(Check::Done(())) },
    )
    .await
    .unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(50),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn retry_counts_failures_but_not_busy_refusals_and_returns_the_last_answer() {
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    let calls = Mutex::new(0u32);
    let calls_ref = &calls;
    let retries = Mutex::new(Vec::new());
    // Busy, again at once, then failures: only the failures count, and the third is returned.
    let r: Result<u32, CloudError> = retry(
        &ctx,
        fast(),
        3,
        move || {
            let n = {
                let mut c = calls_ref.lock().unwrap();
                *c += 1;
                *c
            };
            async move {
                let failure = |last: Result<u32, CloudError>| Failure {
                    last,
                    retry_after: None,
                    waiting_for: format!("attempt {n}"),
                };
                Ok(match n {
                    1 => Attempt::Busy(failure(Err(CloudError::Stopped))),
                    2 => Attempt::Again,
                    _ => Attempt::Failed(failure(Ok(n))),
                })
            }
        },
        |f, counted, _| {
            retries
                .lock()
                .unwrap()
                .push((f.waiting_for.clone(), counted))
        },
    )
    .await;
    assert_eq!(r.unwrap(), 5);
    assert_eq!(*calls.lock().unwrap(), 5);
    assert_eq!(
        *retries.lock().unwrap(),
        [
            ("attempt 1".to_string(), 0),
            ("attempt 3".to_string(), 1),
            ("attempt 4".to_string(), 2)
        ]
    );

    // An error from an attempt is final.
    let r: Result<(), _> = retry(
        &ctx,
        fast(),
        3,
        || async { Err(CloudError::Transport("gone".into())) },
        |_, _, _| panic!("no retry"),
    )
    .await;
    assert!(matches!(r, Err(CloudError::Transport(_))), "{r:?}");
}

/// One wait with `pace` for an operation of `kind` that ends `lasts` after the wait starts:
/// the looks it took, and when the first came.
async fn paced_wait(pace: &Pace, kind: &str, lasts: Duration) -> (usize, Duration) {
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    let began = Instant::now();
    let looks = Mutex::new(Vec::new());
    let looks_ref = &looks;
    let backoff = Backoff::polling(Duration::from_millis(10), Duration::from_millis(40));
    pace.time(kind, Start::Sleep(None), backoff, |start, backoff| {
        poll_until(&ctx, backoff, kind.to_string(), start, move |_| {
            looks_ref.lock().unwrap().push(began.elapsed());
            async move {
                Ok::<_, CloudError>(if began.elapsed() >= lasts {
                    Check::Done(())
                } else {
                    Check::Pending {
                        retry_after: None,
                        waiting_for: None,
                    }
                })
            }
        })
    })
    .await
    .unwrap();
    let looks = looks.into_inner().unwrap();
    (looks.len(), looks[0])
}

#[tokio::test]
async fn a_paced_wait_first_looks_shortly_before_its_kind_was_last_seen_done() {
    let pace = Pace::default();
    let lasts = Duration::from_millis(300);
    // Nothing seen yet: the backoff's short first delays (10 ms, then growing by half).
    let (first_looks, _) = paced_wait(&pace, "create", lasts).await;
    assert!(first_looks >= 3, "{first_looks} looks");
    // The next create's first look comes at 95% of that wait, and looks 5% of it apart (growing
    // by half) reach the end of the operation from there: two looks or three.
    let (looks, first) = paced_wait(&pace, "create", lasts).await;
    assert!(first >= lasts.mul_f64(0.95), "first look at {first:?}");
    assert!(looks <= 3, "{looks} looks");
    // Another kind of operation has learnt nothing.
    let (_, first) = paced_wait(&pace, "delete", Duration::from_millis(30)).await;
    assert!(first < Duration::from_millis(30), "first look at {first:?}");
}

#[test]
fn the_pace_keeps_the_quickest_wait_of_each_kind() {
    let pace = Pace::default();
    let backoff = || Backoff::polling(Duration::from_secs(10), Duration::from_secs(30));
    assert!(matches!(
        pace.start("create", Start::Now, backoff()).0,
        Start::Now
    ));
    pace.record("create", Duration::from_secs(200));
    pace.record("create", Duration::from_secs(100));
    pace.record("create", Duration::from_secs(300));
    match pace.start("create", Start::Now, backoff()) {
        (Start::After(d), mut then) => {
            assert_eq!(d, Duration::from_secs(95));
            // 5 s, not the backoff's 10 s, up to 20% jitter.
            let next = then.next_delay(None);
            assert!(next >= Duration::from_secs(5) && next <= Duration::from_secs(6));
        }
        _ => panic!("a paced start"),
    }
    assert!(matches!(
        pace.start("delete", Start::Now, backoff()).0,
        Start::Now
    ));

    // An operation done before the backoff's first delay (10 s here) teaches nothing: the wait
    // starts as it would have, and its delays do not shrink.
    pace.record("delete", Duration::from_millis(3));
    let (start, mut then) = pace.start("delete", Start::Now, backoff());
    assert!(matches!(start, Start::Now));
    assert!(then.next_delay(None) >= Duration::from_secs(10));
    // The steps after the first look stay at a fifth of the backoff's first delay or more.
    pace.record("resize", Duration::from_secs(20));
    match pace.start("resize", Start::Now, backoff()) {
        (Start::After(d), mut then) => {
            assert_eq!(d, Duration::from_secs(19));
            let next = then.next_delay(None);
            assert!(next >= Duration::from_secs(2), "{next:?}");
        }
        _ => panic!("a paced start"),
    }
}

#[tokio::test]
async fn a_failed_wait_teaches_the_pace_nothing() {
    let pace = Pace::default();
    let backoff = Backoff::polling(Duration::from_millis(10), Duration::from_millis(40));
    let r: Result<(), _> = pace
        .time("create", Start::Now, backoff, |_, _| async {
            Err(CloudError::OperationFailed {
                code: "CREATE_FAILED".into(),
                message: "no capacity".into(),
            })
        })
        .await;
    assert!(r.is_err());
    let backoff = Backoff::polling(Duration::from_millis(10), Duration::from_millis(40));
    assert!(matches!(
        pace.start("create", Start::Now, backoff).0,
        Start::Now
    ));
}

/// A wait under `ctx` that looks after `delays` (the first delay and the cap of a backoff that
/// grows by half) at an operation that ends `lasts` after the wait starts: when it saw it done,
/// and how many looks that took.
async fn watched_wait(
    pace: &Pace,
    ctx: &OpCtx,
    kind: &str,
    delays: (u64, u64),
    lasts: Duration,
) -> (Duration, usize) {
    let began = Instant::now();
    let looks = Mutex::new(0);
    let looks_ref = &looks;
    let backoff = Backoff::polling(
        Duration::from_millis(delays.0),
        Duration::from_millis(delays.1),
    );
    pace.time(kind, Start::Sleep(None), backoff, |start, backoff| {
        poll_until(ctx, backoff, kind.to_string(), start, move |_| {
            *looks_ref.lock().unwrap() += 1;
            async move {
                Ok::<_, CloudError>(if began.elapsed() >= lasts {
                    Check::Done(())
                } else {
                    Check::Pending {
                        retry_after: None,
                        waiting_for: None,
                    }
                })
            }
        })
    })
    .await
    .unwrap();
    (began.elapsed(), looks.into_inner().unwrap())
}

#[tokio::test]
async fn a_wait_looks_at_once_when_another_of_its_kind_is_seen_done() {
    let pace = Pace::default();
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    let lasts = Duration::from_millis(400);
    // Two creates start together and end together. One looks every 10 to 20 ms and sees its
    // operation done at about 410 ms; the other's delays start at 250 ms, so on its own it
    // would look at 250 to 300 ms and then not before 625 ms.
    let quick = pace.watching("create", &ctx);
    let slow = pace.watching("create", &ctx);
    // A delete that started with them has waited as long, but it is of another kind.
    let other = pace.watching("delete", &ctx);
    let ((quick_done, _), (slow_done, slow_looks), (other_done, _)) = tokio::join!(
        watched_wait(&pace, &quick, "create", (10, 20), lasts),
        watched_wait(&pace, &slow, "create", (250, 2000), lasts),
        watched_wait(&pace, &other, "delete", (250, 2000), lasts),
    );
    assert!(quick_done < Duration::from_millis(550), "{quick_done:?}");
    assert!(
        slow_done < Duration::from_millis(600),
        "the slow wait saw its operation done at {slow_done:?}, not when the quick one did"
    );
    assert_eq!(
        slow_looks, 2,
        "its look at 250 ms and the one it was nudged to"
    );
    assert!(
        other_done >= Duration::from_millis(600),
        "a delete was nudged by a create: done at {other_done:?}"
    );
}

#[tokio::test]
async fn a_wait_is_not_nudged_by_an_operation_that_was_quicker_than_its_own_last_look() {
    let pace = Pace::default();
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    // This create runs 600 ms and looks at 250 ms (still running), then sleeps until about
    // 625 ms. A create that started with it and was seen done at 150 ms says nothing about it
    // (it had already waited longer than that): no extra look.
    let long = pace.watching("create", &ctx);
    let ((_, long_looks), ()) = tokio::join!(
        watched_wait(
            &pace,
            &long,
            "create",
            (250, 2000),
            Duration::from_millis(600)
        ),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            pace.record("create", Duration::from_millis(150));
        },
    );
    assert_eq!(long_looks, 2, "looks at about 250 and 625 ms only");
}

#[tokio::test]
async fn a_wait_is_nudged_once_however_many_of_its_kind_end_while_it_runs() {
    let pace = Pace::default();
    let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
    // A create of 1.3 s, whose delays start at 250 ms. Peers that started with it end at 400,
    // 450 and 500 ms: the first brings a look forward (still running), the others do not, and
    // the wait goes on at its own delays.
    let long = pace.watching("create", &ctx);
    let ((_, looks), ()) = tokio::join!(
        watched_wait(
            &pace,
            &long,
            "create",
            (250, 2000),
            Duration::from_millis(1300)
        ),
        async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            pace.record("create", Duration::from_millis(400));
            for at in [450, 500] {
                tokio::time::sleep(Duration::from_millis(50)).await;
                pace.record("create", Duration::from_millis(at));
            }
        },
    );
    // Looks at 250-300 ms, the nudged one at about 400 ms, then after 562-675 ms (still
    // running) and after 843-1012 ms more (done): four. A look per peer made five or six.
    assert_eq!(looks, 4);
}
