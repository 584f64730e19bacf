from rag_common.runner import serve
from rag_gateway.settings import GatewaySettings

serve("rag_gateway.app:create_app", GatewaySettings())
