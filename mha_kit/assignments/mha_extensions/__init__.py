"""The extension track: `GeneralMultiHeadAttention`, the seed tutorials' variants in one module."""
