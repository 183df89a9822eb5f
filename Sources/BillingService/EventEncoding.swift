public import Billing
import BillingAPI
import ProtoWire

/// An event as the feed's RPCs send it (billing.v1.Event, binary), for senders outside the RPCs (webhooks).
public enum EventEncoding {
    public static func encoded(_ event: EventRecord) -> [UInt8] { BillingAPI.Event(event).encoded() }
}
