"""The collector: runs kernel sweeps and writes self-describing run records.

It runs inside the pinned framework image and knows nothing of GitHub. Importing this
package must not import torch: the bot side reads run records without a GPU stack.
"""
