//! NVMe status codes and the controller's error type.
//!
//! One error type for the controller, mapped once to an NVMe status name (here), an NBD
//! errno (in the NBD server) and a CLI message (in the bindings).

use std::fmt;

/// The NVMe statuses the twin can return, with their Status Code Type and Status Code.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidOpcode,
    InvalidField,
    InvalidNamespaceOrFormat,
    NamespaceWriteProtected,
    LbaOutOfRange,
    CapacityExceeded,
    InvalidLogPage,
    InvalidFormat,
    FeatureNotSaveable,
    FeatureNotChangeable,
    NsInsufficientCapacity,
    NsIdUnavailable,
    NsAlreadyAttached,
    NsNotAttached,
    ThinProvisioningNotSupported,
    ControllerListInvalid,
    CommandSequenceError,
    UnrecoveredReadError,
    AnaPersistentLoss,
    AnaInaccessible,
    AnaTransition,
    SanitizeFailed,
    SanitizeInProgress,
    GuardCheck,
    AppTagCheck,
    RefTagCheck,
}

impl Status {
    /// (status code type, status code) as in the NVMe base specification.
    pub fn code(self) -> (u8, u8) {
        use Status::*;
        match self {
            InvalidOpcode => (0, 0x01),
            InvalidField => (0, 0x02),
            InvalidNamespaceOrFormat => (0, 0x0B),
            NamespaceWriteProtected => (0, 0x20),
            LbaOutOfRange => (0, 0x80),
            CapacityExceeded => (0, 0x81),
            InvalidLogPage => (1, 0x09),
            InvalidFormat => (1, 0x0A),
            FeatureNotSaveable => (1, 0x0D),
            FeatureNotChangeable => (1, 0x0E),
            NsInsufficientCapacity => (1, 0x15),
            NsIdUnavailable => (1, 0x16),
            NsAlreadyAttached => (1, 0x18),
            NsNotAttached => (1, 0x1A),
            ThinProvisioningNotSupported => (1, 0x1B),
            ControllerListInvalid => (1, 0x1C),
            CommandSequenceError => (0, 0x0C),
            UnrecoveredReadError => (2, 0x81),
            AnaPersistentLoss => (3, 0x01),
            AnaInaccessible => (3, 0x02),
            AnaTransition => (3, 0x03),
            SanitizeFailed => (0, 0x1C),
            SanitizeInProgress => (0, 0x1D),
            GuardCheck => (2, 0x82),
            AppTagCheck => (2, 0x83),
            RefTagCheck => (2, 0x84),
        }
    }

    /// The 15-bit status field with Do Not Retry (bit 14) set, as nvme-cli prints it
    /// (e.g. 0x4115).
    pub fn field(self) -> u16 {
        let (sct, sc) = self.code();
        // Path-related statuses (SCT 3, ANA) leave DNR clear: the host retries on another path.
        let dnr = if sct == 3 { 0 } else { 0x4000 };
        dnr | (sct as u16) << 8 | sc as u16
    }

    /// nvme-cli's name for the status.
    pub fn name(self) -> &'static str {
        use Status::*;
        match self {
            InvalidOpcode => "INVALID_OPCODE",
            InvalidField => "INVALID_FIELD",
            InvalidNamespaceOrFormat => "INVALID_NS",
            NamespaceWriteProtected => "NS_WRITE_PROTECTED",
            LbaOutOfRange => "LBA_RANGE",
            CapacityExceeded => "CAP_EXCEEDED",
            InvalidLogPage => "INVALID_LOG_PAGE",
            InvalidFormat => "INVALID_FORMAT",
            FeatureNotSaveable => "FEATURE_NOT_SAVEABLE",
            FeatureNotChangeable => "FEATURE_NOT_CHANGEABLE",
            NsInsufficientCapacity => "NS_INSUFFICIENT_CAPACITY",
            NsIdUnavailable => "NS_ID_UNAVAILABLE",
            NsAlreadyAttached => "NS_ALREADY_ATTACHED",
            NsNotAttached => "NS_NOT_ATTACHED",
            ThinProvisioningNotSupported => "THIN_PROVISIONING_NOT_SUPPORTED",
            ControllerListInvalid => "CTRL_LIST_INVALID",
            CommandSequenceError => "CMD_SEQ_ERROR",
            UnrecoveredReadError => "READ_ERROR",
            AnaPersistentLoss => "ANA_PERSISTENT_LOSS",
            AnaInaccessible => "ANA_INACCESSIBLE",
            AnaTransition => "ANA_TRANSITION",
            SanitizeFailed => "SANITIZE_FAILED",
            SanitizeInProgress => "SANITIZE_IN_PROGRESS",
            GuardCheck => "GUARD_CHECK",
            AppTagCheck => "APPTAG_CHECK",
            RefTagCheck => "REFTAG_CHECK",
        }
    }

    /// The specification's one-line description.
    pub fn description(self) -> &'static str {
        use Status::*;
        match self {
            InvalidOpcode => "The associated command opcode field is not valid",
            InvalidField => "A reserved coded value or an unsupported value in a defined field",
            InvalidNamespaceOrFormat => "The namespace or the format of that namespace is invalid",
            NamespaceWriteProtected => "The command is prohibited while the namespace is write protected",
            LbaOutOfRange => "The command references an LBA that exceeds the size of the namespace",
            CapacityExceeded => "The execution of the command has caused the capacity of the namespace to be exceeded",
            InvalidLogPage => "The log page indicated is invalid",
            InvalidFormat => "The LBA Format specified is not supported",
            FeatureNotSaveable => "The Feature Identifier specified does not support a saveable value",
            FeatureNotChangeable => "The Feature Identifier is not able to be changed",
            NsInsufficientCapacity => "Creating the namespace requires more free space than is currently available",
            NsIdUnavailable => "The number of namespaces supported has been exceeded",
            NsAlreadyAttached => "The controller is already attached to the namespace specified",
            NsNotAttached => {
                "The request to detach the controller could not be completed because the controller is not attached to the namespace"
            }
            ThinProvisioningNotSupported => "Thin provisioning is not supported by the controller",
            ControllerListInvalid => "The controller list provided contains invalid controller ids",
            CommandSequenceError => "The command was aborted due to a protocol violation in a multi-command sequence",
            UnrecoveredReadError => "The read data could not be recovered from the media",
            AnaPersistentLoss => "The requested function is not able to be performed in the ANA Persistent Loss state",
            AnaInaccessible => "Asymmetric Access Inaccessible: the namespace is not accessible through this controller",
            AnaTransition => "Asymmetric Access Transition: the ANA state is changing",
            SanitizeFailed => "The most recent sanitize operation failed and no recovery action has been successfully completed",
            SanitizeInProgress => "The requested function is prohibited while a sanitize operation is in progress",
            GuardCheck => "The command was aborted due to an end-to-end guard check failure",
            AppTagCheck => "The command was aborted due to an end-to-end application tag check failure",
            RefTagCheck => "The command was aborted due to an end-to-end reference tag check failure",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({:#06x})", self.name(), self.description(), self.field())
    }
}

/// Why the FTL maps could not be loaded (returned by a [`crate::nvme::MapStore`]).
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error(transparent)]
    Fs(#[from] crate::fsio::FsError),
    #[error("drive image damaged: {}: {reason}", path.display())]
    Damaged { path: std::path::PathBuf, reason: String },
}

/// A failed controller command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command completed with an NVMe error status; `detail` says what was wrong.
    #[error("NVMe status {}({:#x}): {detail}", status.name(), status.field())]
    Status { status: Status, detail: String },
    /// The FTL maps, kept on disk until first needed, could not be loaded.
    #[error(transparent)]
    Maps(#[from] MapError),
    /// The FTL maps could not be allocated (anonymous memory).
    #[error("cannot allocate the FTL maps: {0}")]
    Memory(#[source] std::io::Error),
    /// A full consistency check found a violated invariant.
    #[error("FTL invariant violated: {0}")]
    Inconsistent(#[from] InvalidState),
}

impl Error {
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Status { status, .. } => Some(*status),
            Error::Maps(_) | Error::Memory(_) | Error::Inconsistent(_) => None,
        }
    }
}

pub(crate) fn fail<T>(status: Status, detail: impl Into<String>) -> Result<T, Error> {
    Err(Error::Status { status, detail: detail.into() })
}

/// A persisted state that does not hold together (what was wrong, in words).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidState(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_match_nvme_cli() {
        assert_eq!(Status::NsInsufficientCapacity.field(), 0x4115);
        assert_eq!(Status::InvalidNamespaceOrFormat.field(), 0x400b);
        assert_eq!(Status::LbaOutOfRange.field(), 0x4080);
        assert_eq!(Status::AnaInaccessible.field(), 0x0302);
        assert_eq!(Status::UnrecoveredReadError.field(), 0x4281);
    }
}
