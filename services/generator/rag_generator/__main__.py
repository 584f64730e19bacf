from rag_common.runner import serve
from rag_generator.settings import GeneratorSettings

serve("rag_generator.app:create_app", GeneratorSettings())
