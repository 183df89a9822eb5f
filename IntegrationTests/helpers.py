"""Shared helpers: stubs, and reading the rich error model with grpcio-status."""
import grpc
from grpc_status import rpc_status
from google.rpc import error_details_pb2

from billing.v1 import billing_pb2 as pb
from billing.v1 import billing_pb2_grpc as pb_grpc


def billing(channel):
    return pb_grpc.BillingStub(channel)


def error_info(err):
    """The google.rpc.ErrorInfo of a failed call, decoded by grpcio-status."""
    status = rpc_status.from_call(err)
    assert status is not None, f"no grpc-status-details-bin on {err.code()}: {err.details()}"
    assert status.code == err.code().value[0]
    assert status.message == err.details()
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo in details")


def expect_error(call, code, reason=None, **kwargs):
    try:
        call(**kwargs) if kwargs else call()
    except grpc.RpcError as err:
        assert code is None or err.code() == code, f"{err.code()} {err.details()}"
        if reason is not None:
            info = error_info(err)
            assert info.reason == reason
            assert info.domain == "billing.v1"
            return info
        return err
    raise AssertionError(f"expected {code}")
