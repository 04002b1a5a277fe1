from openai import OpenAI
client = OpenAI(api_key="EMPTY", base_url="http://localhost:8000/v1")
response = client.completions.create(model="Qwen/Qwen3-8B", prompt="The future of AI is",
                                     max_tokens=100, temperature=0.7, seed=42)
print(response.choices[0].text)
