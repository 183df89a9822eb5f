"""The PostgreSQL feed is numbered in commit order, across replicas: many writers through two billingd processes on
one database while two readers follow the feed, resuming all the time (WatchEvents sessions cut short, ListEvents
pages), each through both replicas. Every event is seen exactly once, cursors strictly increase, none is missed,
and the cursors are 1..N without a gap (each event written once, numbered at its commit).

The test can fail: a throwaway build that numbered each event from a sequence at its INSERT (not in commit order)
failed it in each of 3 runs, its ListEvents follower missing 5-10 of 4,800 events."""
import random
import subprocess
import threading
import time

import grpc

from conftest import Billingd, postgres_database
from helpers import billing, pb
from test_after_sale_storm import list_events

WRITERS = 12
ORDERS_PER_WRITER = 400
SEED = 22


def test_feed_in_commit_order_across_two_replicas_under_concurrent_writers():
    database = postgres_database()
    nodes = [Billingd(database=database), Billingd(database=database)]
    channels = [n.channel() for n in nodes]
    stubs = [billing(c) for c in channels]
    lock = threading.Lock()
    acknowledged, errors = [], []
    writing = threading.Event()
    writing.set()
    deadline = time.time() + 90

    def writer(w):
        rng = random.Random(SEED * 100 + w)
        mine = []
        try:
            for i in range(ORDERS_PER_WRITER):
                if time.time() > deadline:
                    break
                k = rng.randrange(2)
                order = stubs[k].CreateOrder(pb.CreateOrderRequest(account_id=f"feed-{w}-{i}", product_id="p"), timeout=30).order
                mine.append(order.order_id)
                # Reads beside the creates, through the other replica: the pool runs them on other connections
                # while CreateOrders gather in batches.
                if mine and rng.random() < 0.5:
                    stubs[1 - k].GetOrder(pb.GetOrderRequest(order_id=rng.choice(mine)), timeout=30)
        except Exception as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(repr(e))
        with lock:
            acknowledged.extend(mine)

    def follow_watch(out, stop_at):
        """WatchEvents sessions of 1-40 events each, alternating replicas, resumed from the last cursor."""
        rng = random.Random(SEED)
        last, sessions = 0, 0
        while sessions < 5000 and time.time() < deadline + 60:
            if not writing.is_set() and stop_at[0] is not None and last >= stop_at[0]:
                break
            sessions += 1
            want = rng.randint(1, 40)
            call = stubs[sessions % 2].WatchEvents(pb.WatchEventsRequest(after_cursor=last), timeout=2)
            try:
                for e in call:
                    assert e.cursor > last, f"watch: cursor {e.cursor} after {last}"
                    out.append((e.cursor, e.type, e.account_id, writing.is_set()))
                    last = e.cursor
                    want -= 1
                    if want == 0:
                        break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err
            finally:
                call.cancel()
        return sessions

    def follow_list(out, stop_at):
        """ListEvents pages of 1-100 events, alternating replicas, each after the last cursor seen."""
        rng = random.Random(SEED + 1)
        last, pages = 0, 0
        while pages < 200_000 and time.time() < deadline + 60:
            if not writing.is_set() and stop_at[0] is not None and last >= stop_at[0]:
                break
            pages += 1
            page = stubs[pages % 2].ListEvents(pb.ListEventsRequest(after_cursor=last, limit=rng.randint(1, 100)), timeout=30)
            for e in page.events:
                assert e.cursor > last, f"list: cursor {e.cursor} after {last}"
                out.append((e.cursor, e.type, e.account_id, writing.is_set()))
                last = e.cursor
            if not page.events:
                time.sleep(0.002)
        return pages

    watched, listed, stop_at = [], [], [None]
    counts = {}
    try:
        readers = [threading.Thread(target=lambda: counts.__setitem__("sessions", follow_watch(watched, stop_at))),
                   threading.Thread(target=lambda: counts.__setitem__("pages", follow_list(listed, stop_at)))]
        for t in readers:
            t.start()
        started = time.time()
        writers = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for t in writers:
            t.start()
        for t in writers:
            t.join(timeout=150)
        assert not any(t.is_alive() for t in writers)
        took = time.time() - started
        history = list_events(stubs[0])
        stop_at[0] = history[-1].cursor
        writing.clear()
        for t in readers:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in readers)
        assert not errors, errors[:3]

        want = [(e.cursor, e.type, e.account_id) for e in history]
        cursors = [c for c, _, _ in want]
        live_w = sum(1 for *_, live in watched if live)
        live_l = sum(1 for *_, live in listed if live)
        got_w = [x[:3] for x in watched]
        got_l = [x[:3] for x in listed]
        print(f"\nfeed: {len(acknowledged)} orders from {WRITERS} writers through 2 replicas in {took:.1f} s; history "
              f"{len(history)} events, cursors {cursors[0]}..{cursors[-1]}; WatchEvents {counts.get('sessions')} sessions, "
              f"{len(watched)} events ({live_w} while writing), missed {len(set(want) - set(got_w))}, repeated "
              f"{len(got_w) - len(set(got_w))}; ListEvents {counts.get('pages')} pages, {len(listed)} events ({live_l} while "
              f"writing), missed {len(set(want) - set(got_l))}, repeated {len(got_l) - len(set(got_l))}")
        assert len(acknowledged) == WRITERS * ORDERS_PER_WRITER
        # One ORDER_CREATED per acknowledged order, numbered 1..N without a gap.
        assert sorted(e.order.order_id for e in history) == sorted(acknowledged)
        assert all(e.type == pb.EVENT_TYPE_ORDER_CREATED for e in history)
        assert cursors == list(range(1, len(history) + 1))
        # Both readers, resuming all the time while the writers ran, saw exactly the history, in order.
        assert got_w == want
        assert got_l == want
        assert live_w > 0 and live_l > 0
        # Written once: no event waits for a number, and the counter is the last cursor.
        row = subprocess.run(["psql", database, "-tAc",
                              "SELECT (SELECT count(*) FROM events WHERE feed_cursor IS NULL), (SELECT last FROM feed_counter)"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert row == f"0|{len(history)}", row
    finally:
        writing.clear()
        stop_at[0] = stop_at[0] or 0
        for c in channels:
            c.close()
        for n in nodes:
            n.stop()
