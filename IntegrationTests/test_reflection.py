"""gRPC server reflection: a client with no stubs (grpcio-reflection) discovers and calls billingd."""
import os
import subprocess
import tempfile

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from conftest import ROOT


def test_reflection_lists_describes_and_calls(server):
    with server.channel() as ch:
        db = ProtoReflectionDescriptorDatabase(ch)
        assert set(db.get_services()) == {"billing.v1.Billing", "billing.v1.Support", "billing.v1.Revenue", "billing.admin.v1.Admin",
                                         "grpc.health.v1.Health"}
        pool = DescriptorPool(db)
        support = pool.FindServiceByName("billing.v1.Support")
        assert [m.name for m in support.methods] == ["FindCustomers", "GetCustomer", "ExplainAccess", "GrantEntitlement", "RevokeGrant",
                                                       "TransferPurchases", "RefundPurchase", "DeleteCustomer", "ListAuditEntries"]
        svc = pool.FindServiceByName("billing.v1.Billing")
        assert [m.name for m in svc.methods] == ["CreateOrder", "SubmitReceipt", "RestorePurchases", "GetOrder", "GetEntitlements",
                                                   "ListEvents", "WatchEvents", "ListTransactions", "GetTransaction", "SignOffer"]
        create = svc.methods_by_name["CreateOrder"]
        Req = message_factory.GetMessageClass(create.input_type)
        Resp = message_factory.GetMessageClass(create.output_type)
        call = ch.unary_unary("/billing.v1.Billing/CreateOrder", request_serializer=Req.SerializeToString,
                              response_deserializer=Resp.FromString)
        order = call(Req(account_id="reflect", product_id="p"), timeout=5).order
        assert order.account_id == "reflect"
        assert pool.FindMessageTypeByName("billing.v1.Order").fields_by_name["order_id"].number == 1
        assert pool.FindEnumTypeByName("billing.v1.OrderState").values_by_name["ORDER_STATE_EXPIRED"].number == 4
        try:
            pool.FindServiceByName("nope.Service")
            raise AssertionError("an unknown symbol was found")
        except KeyError:
            pass


def test_reflection_data_is_current():
    out = os.path.join(tempfile.mkdtemp(), "ReflectionData.swift")
    subprocess.run(["python3", os.path.join(ROOT, "scripts/golden/make_descriptors.py"), out], check=True)
    assert open(out).read() == open(os.path.join(ROOT, "Sources/BillingService/ReflectionData.swift")).read()
