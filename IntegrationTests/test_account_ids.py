"""Account ids refuse what a person cannot see or what reorders text (docs/ERRORS.md, "Account ids"), on every
method that takes one, over gRPC with grpcio: INVALID_ARGUMENT, reason INVALID_FIELD, metadata field=account_id."""
import grpc
import pytest

from helpers import billing, error_info
from billing.v1 import billing_pb2 as pb

REFUSED = {
    "U+202E right-to-left override (Cf)": "\u202egnp.exe",
    "U+200B zero width space (Cf)": "user\u200b42",
    "U+2028 line separator (Zl)": "user\u202842",
    "U+2029 paragraph separator (Zp)": "user\u202942",
    "U+FEFF zero width no-break space (Cf)": "\ufeffuser42",
    "U+2066 left-to-right isolate (Cf)": "user\u206642",
    "U+0085 next line (Cc, C1)": "user\u008542",
    "U+007F delete (Cc)": "user42\u007f",
    "leading space": " user42",
    "trailing space": "user42 ",
    "trailing no-break space": "user42\u00a0",
    "leading ideographic space": "\u3000user42",
}
ACCEPTED = ["user 42", "José", "用户-7", "e\u0301"]


def calls(stub, account):
    """Every Billing method that validates an account id, as zero-argument callables."""
    return {
        "CreateOrder": lambda: stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id="com.example.premium"), timeout=10),
        "RestorePurchases": lambda: stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account), timeout=10),
        "GetEntitlements": lambda: stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account), timeout=10),
        "ListEvents": lambda: stub.ListEvents(pb.ListEventsRequest(account_id=account), timeout=10),
        "ListTransactions": lambda: stub.ListTransactions(pb.ListTransactionsRequest(account_id=account), timeout=10),
        "WatchEvents": lambda: next(iter(stub.WatchEvents(pb.WatchEventsRequest(account_id=account), timeout=2))),
    }


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_invisible_and_reordering_account_ids_are_refused(server, name):
    with server.channel() as ch:
        for method, call in calls(billing(ch), REFUSED[name]).items():
            with pytest.raises(grpc.RpcError) as caught:
                call()
            err = caught.value
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, method, err.code(), err.details())
            info = error_info(err)
            assert info.reason == "INVALID_FIELD" and info.metadata["field"] == "account_id", (name, method, info)


@pytest.mark.parametrize("account", ACCEPTED)
def test_visible_account_ids_with_inner_spaces_are_accepted(server, account):
    with server.channel() as ch:
        stub = billing(ch)
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id="com.example.premium"), timeout=10).order
        assert order.account_id == account
        stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account), timeout=10)
        stub.ListTransactions(pb.ListTransactionsRequest(account_id=account), timeout=10)
        assert [e.account_id for e in stub.ListEvents(pb.ListEventsRequest(account_id=account), timeout=10).events] == [account]
